#pragma once
// A strict reader of JSON text (RFC 8259) for the tests: parses a whole
// document into a tree, or says it is not JSON. Enough to check that the
// metrics lines and reports are valid and to read numbers back from them.

#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace keel::test {

struct json {
  enum class kind { null, boolean, number, string, array, object } type = kind::null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<json> array;
  std::map<std::string, json> object;

  // The member `key` of an object (a null value if absent).
  const json& operator[](const std::string& key) const {
    static const json none;
    auto it = object.find(key);
    return it == object.end() ? none : it->second;
  }
};

class json_reader {
 public:
  explicit json_reader(const std::string& text) : s_(text) {}

  std::optional<json> document() {
    json v;
    if (!value(v))
      return std::nullopt;
    space();
    if (i_ != s_.size())
      return std::nullopt;
    return v;
  }

 private:
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool literal(const char* word) {
    std::string w(word);
    if (s_.compare(i_, w.size(), w) != 0)
      return false;
    i_ += w.size();
    return true;
  }
  bool value(json& v) {
    space();
    if (i_ >= s_.size())
      return false;
    char c = s_[i_];
    if (c == '{')
      return object(v);
    if (c == '[')
      return array(v);
    if (c == '"')
      return v.type = json::kind::string, string(v.string);
    if (literal("null"))
      return v.type = json::kind::null, true;
    if (literal("true"))
      return v.type = json::kind::boolean, v.boolean = true, true;
    if (literal("false"))
      return v.type = json::kind::boolean, v.boolean = false, true;
    return number(v);
  }
  bool number(json& v) {
    size_t start = i_;
    if (i_ < s_.size() && s_[i_] == '-')
      ++i_;
    if (i_ >= s_.size() || !isdigit(s_[i_]))
      return false;
    if (s_[i_] == '0')
      ++i_;
    else
      while (i_ < s_.size() && isdigit(s_[i_])) ++i_;
    if (i_ < s_.size() && s_[i_] == '.') {
      if (++i_ >= s_.size() || !isdigit(s_[i_]))
        return false;
      while (i_ < s_.size() && isdigit(s_[i_])) ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-'))
        ++i_;
      if (i_ >= s_.size() || !isdigit(s_[i_]))
        return false;
      while (i_ < s_.size() && isdigit(s_[i_])) ++i_;
    }
    v.type = json::kind::number;
    v.number = std::strtod(s_.substr(start, i_ - start).c_str(), nullptr);
    return true;
  }
  bool string(std::string& out) {
    ++i_;  // the opening quote
    while (i_ < s_.size()) {
      unsigned char c = s_[i_++];
      if (c == '"')
        return true;
      if (c < 0x20)
        return false;
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (i_ >= s_.size())
        return false;
      char e = s_[i_++];
      if (e == 'u') {
        if (i_ + 4 > s_.size())
          return false;
        for (size_t k = 0; k < 4; ++k)
          if (!isxdigit(static_cast<unsigned char>(s_[i_ + k])))
            return false;
        auto code = std::strtoul(s_.substr(i_, 4).c_str(), nullptr, 16);
        i_ += 4;
        out += code < 0x80 ? static_cast<char>(code) : '?';
      } else if (std::string("\"\\/bfnrt").find(e) != std::string::npos) {
        out += e == 'n'   ? '\n'
               : e == 't' ? '\t'
               : e == 'r' ? '\r'
               : e == 'b' ? '\b'
               : e == 'f' ? '\f'
                          : e;
      } else {
        return false;
      }
    }
    return false;
  }
  bool array(json& v) {
    v.type = json::kind::array;
    ++i_;
    space();
    if (i_ < s_.size() && s_[i_] == ']')
      return ++i_, true;
    for (;;) {
      json item;
      if (!value(item))
        return false;
      v.array.push_back(std::move(item));
      space();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      return i_ < s_.size() && s_[i_++] == ']';
    }
  }
  bool object(json& v) {
    v.type = json::kind::object;
    ++i_;
    space();
    if (i_ < s_.size() && s_[i_] == '}')
      return ++i_, true;
    for (;;) {
      space();
      std::string key;
      if (i_ >= s_.size() || s_[i_] != '"' || !string(key))
        return false;
      space();
      if (i_ >= s_.size() || s_[i_++] != ':')
        return false;
      json item;
      if (!value(item))
        return false;
      v.object[key] = std::move(item);
      space();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      return i_ < s_.size() && s_[i_++] == '}';
    }
  }

  const std::string& s_;
  size_t i_ = 0;
};

inline std::optional<json> parse_json(const std::string& text) {
  return json_reader(text).document();
}

}  // namespace keel::test
