#include "actors/core/failure_series.hpp"

#include <cctype>
#include <cstdio>

namespace keel {

namespace {

std::string seconds(int64_t ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ms) / 1000.0);
  return text;
}

}  // namespace

std::string failure_series::key_of(const std::string& text) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  std::string key;
  for (size_t i = 0; i < text.size();) {
    if (!alnum(text[i])) {
      key += text[i++];
      continue;
    }
    size_t end = i;
    bool digit = false;
    for (; end < text.size() && alnum(text[end]); ++end)
      digit = digit || std::isdigit(static_cast<unsigned char>(text[end]));
    key += digit ? std::string("#") : text.substr(i, end - i);
    i = end;
  }
  return key;
}

std::vector<failure_series::line> failure_series::failed(const std::string& text, int64_t at_ms) {
  std::vector<line> out;
  auto key = key_of(text);
  if (count_ > 0 && key != key_)
    out = ended("another failure", at_ms);
  last_text_ = text;
  if (count_ == 0) {
    key_ = std::move(key);
    count_ = 1;
    since_ms_ = at_ms;
    next_summary_ = 10;
    out.push_back({text, 1});
    return out;
  }
  if (++count_ == next_summary_) {
    next_summary_ *= 10;
    out.push_back({"checkpoint failed " + std::to_string(count_) + " times since " + seconds(since_ms_) +
                     ": " + text,
                   count_});
  }
  return out;
}

std::vector<failure_series::line> failure_series::ended(const std::string& how, int64_t at_ms) {
  std::vector<line> out;
  if (count_ > 1)
    out.push_back({"checkpoint failed " + std::to_string(count_) + " times in all from " +
                     seconds(since_ms_) + " to " + seconds(at_ms) + ", ended by " + how + "; the last: " +
                     last_text_,
                   count_});
  count_ = 0;
  return out;
}

}  // namespace keel
