#pragma once
// What the metrics tests read with: a strict reader of Prometheus text
// exposition (every line a HELP, a TYPE or a well-formed sample of a family
// announced before it), `curl` run as a process, and a raw TCP client for
// requests curl will not send.

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>

namespace keel::test {

struct exposition {
  std::map<std::string, double> samples;    // `name{labels}` as written -> value
  std::map<std::string, std::string> help;  // family -> HELP text
  std::map<std::string, std::string> type;  // family -> TYPE
  std::string error;                        // the first line that is not exposition

  std::optional<double> at(const std::string& series) const {
    auto it = samples.find(series);
    if (it == samples.end())
      return std::nullopt;
    return it->second;
  }
};

// The family a sample belongs to: its name without a histogram's suffix.
inline std::string family_of(const std::string& name,
                             const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    std::string s(suffix);
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      auto base = name.substr(0, name.size() - s.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram")
        return base;
    }
  }
  return name;
}

// Reads a metric or label name at `i`: [a-zA-Z_:][a-zA-Z0-9_:]* (no
// colon in a label name).
inline bool read_name(const std::string& s, size_t& i, bool label, std::string& out) {
  auto first = [&](char c) {
    return isalpha(static_cast<unsigned char>(c)) || c == '_' || (!label && c == ':');
  };
  auto rest = [&](char c) { return first(c) || isdigit(static_cast<unsigned char>(c)); };
  if (i >= s.size() || !first(s[i]))
    return false;
  size_t start = i;
  while (i < s.size() && rest(s[i])) ++i;
  out = s.substr(start, i - start);
  return true;
}

// Reads `{name="value",...}` at `i`: quoted values escape only \\, \" and \n.
inline bool read_labels(const std::string& s, size_t& i) {
  if (i >= s.size() || s[i] != '{')
    return true;  // none
  ++i;
  for (;;) {
    std::string name;
    if (!read_name(s, i, true, name) || i + 1 >= s.size() || s[i] != '=' || s[i + 1] != '"')
      return false;
    i += 2;
    for (;;) {
      if (i >= s.size())
        return false;
      char c = s[i++];
      if (c == '"')
        break;
      if (c == '\\') {
        if (i >= s.size() || (s[i] != '\\' && s[i] != '"' && s[i] != 'n'))
          return false;
        ++i;
      }
    }
    if (i < s.size() && s[i] == ',') {
      ++i;
      continue;
    }
    return i < s.size() && s[i++] == '}';
  }
}

inline bool read_value(const std::string& text, double& v) {
  if (text == "NaN")
    return v = NAN, true;
  if (text == "+Inf" || text == "-Inf")
    return v = text[0] == '+' ? INFINITY : -INFINITY, true;
  if (text.empty() || !(isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-'))
    return false;
  char* end = nullptr;
  v = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

inline exposition read_exposition(const std::string& text) {
  static const std::set<std::string> types = {"counter", "gauge", "histogram", "summary",
                                              "untyped"};
  exposition out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t i = 0;
    std::string name;
    if (line.rfind("# HELP ", 0) == 0) {
      i = 7;
      if (!read_name(line, i, false, name) || i >= line.size() || line[i] != ' ')
        return out.error = "a bad HELP line: " + line, out;
      out.help[name] = line.substr(i + 1);
    } else if (line.rfind("# TYPE ", 0) == 0) {
      i = 7;
      if (!read_name(line, i, false, name) || i >= line.size() || line[i] != ' ' ||
          !types.count(line.substr(i + 1)))
        return out.error = "a bad TYPE line: " + line, out;
      if (!out.help.count(name))
        return out.error = "TYPE before HELP: " + line, out;
      out.type[name] = line.substr(i + 1);
    } else {
      double v = 0;
      if (!read_name(line, i, false, name) || !read_labels(line, i) || i >= line.size() ||
          line[i] != ' ' || !read_value(line.substr(i + 1), v))
        return out.error = "not exposition: '" + line + "'", out;
      if (!out.type.count(family_of(name, out.type)))
        return out.error = "a sample of a family not announced: " + line, out;
      out.samples[line.substr(0, i)] = v;
    }
  }
  if (text.empty() || text.back() != '\n')
    out.error = "the text does not end with a newline";
  return out;
}

struct http_reply {
  int status = 0;       // 0: no HTTP response
  std::string headers;  // the status line and headers
  std::string body;
  std::string raw;
};

inline http_reply split_reply(std::string raw) {
  http_reply r;
  r.raw = raw;
  auto end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || end == std::string::npos)
    return r;
  r.headers = raw.substr(0, end);
  r.body = raw.substr(end + 4);
  r.status = std::atoi(raw.substr(9, 3).c_str());
  return r;
}

// Runs `command`, returning its stdout and exit status.
inline std::pair<std::string, int> run_process(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int raw = ::pclose(p);
  return {out, WIFEXITED(raw) ? WEXITSTATUS(raw) : -1};
}

// `curl -i` with `options` against `url`: the reply with its headers.
inline http_reply curl(const std::string& url, const std::string& options = {}) {
  auto [out, status] = run_process("curl -sS -i --max-time 20 " + options + " '" + url + "' 2>&1");
  INFO("curl output: " << out);
  REQUIRE_MESSAGE(status == 0, "curl failed with status " << status);
  return split_reply(out);
}

// A fresh TCP connection to 127.0.0.1:`port` that has sent nothing yet.
inline int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  return fd;
}

// Sends `bytes` over a fresh TCP connection to 127.0.0.1:`port`, closes
// the sending side, and reads until the server closes (10 s at most).
inline http_reply raw_request(uint16_t port, const std::string& bytes) {
  int fd = connect_loopback(port);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  size_t sent = 0;
  while (sent < bytes.size()) {
    auto n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0)
      break;  // the server may answer and stop reading before all is sent
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string got;
  std::array<char, 4096> buf;
  for (;;) {
    auto n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0)
      break;
    got.append(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return split_reply(got);
}

}  // namespace keel::test
