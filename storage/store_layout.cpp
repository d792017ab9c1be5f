#include "storage/store_layout.hpp"

#include <cstdio>

namespace keel {

namespace {

constexpr const char* prefix = "ckpt-";
constexpr size_t id_digits = 20;
constexpr size_t tag_digits = 16;

bool all_hex(const std::string& s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  return true;
}

bool all_digits(const std::string& s, size_t from, size_t n) {
  if (n == 0 || from + n > s.size())
    return false;
  for (size_t i = from; i < from + n; ++i)
    if (s[i] < '0' || s[i] > '9')
      return false;
  return true;
}

// Parses decimal digits that fit in `max`; no sign, no leading '+'.
std::optional<uint64_t> parse_number(const std::string& s, uint64_t max) {
  if (s.empty() || s.size() > 20 || !all_digits(s, 0, s.size()))
    return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    auto d = static_cast<uint64_t>(c - '0');
    if (v > (max - d) / 10)
      return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

std::string padded(uint64_t checkpoint) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%020llu", static_cast<unsigned long long>(checkpoint));
  return buf;
}

// Parses a final (non-temporary) name.
std::optional<store_file_name> parse_final(const std::string& name) {
  size_t p = std::char_traits<char>::length(prefix);
  if (name.compare(0, p, prefix) != 0 || !all_digits(name, p, id_digits))
    return std::nullopt;
  auto id = parse_number(name.substr(p, id_digits), UINT64_MAX);
  if (!id)
    return std::nullopt;
  auto rest = name.substr(p + id_digits);
  if (rest == ".manifest")
    return store_file_name{store_file_kind::manifest, *id, 0};
  const std::string shard_prefix = ".shard-";
  const std::string snap_suffix = ".snap";
  if (rest.size() <= shard_prefix.size() + snap_suffix.size() ||
      rest.compare(0, shard_prefix.size(), shard_prefix) != 0 ||
      rest.compare(rest.size() - snap_suffix.size(), snap_suffix.size(), snap_suffix) != 0)
    return std::nullopt;
  auto middle = rest.substr(shard_prefix.size(), rest.size() - shard_prefix.size() - snap_suffix.size());
  // "<shard>" or "<shard>.<tag>" with a tag of tag_digits lowercase hex digits.
  auto digits = middle;
  if (auto dot = middle.find('.'); dot != std::string::npos) {
    auto tag = middle.substr(dot + 1);
    if (tag.size() != tag_digits || !all_hex(tag))
      return std::nullopt;
    digits = middle.substr(0, dot);
  }
  if (digits.size() > 1 && digits[0] == '0')
    return std::nullopt;  // one spelling per shard
  auto shard = parse_number(digits, UINT32_MAX);
  if (!shard)
    return std::nullopt;
  return store_file_name{store_file_kind::snapshot, *id, static_cast<uint32_t>(*shard)};
}

}  // namespace

std::string manifest_name(uint64_t checkpoint) {
  return prefix + padded(checkpoint) + ".manifest";
}

std::string snapshot_name(uint64_t checkpoint, uint32_t shard) {
  return prefix + padded(checkpoint) + ".shard-" + std::to_string(shard) + ".snap";
}

std::string snapshot_name(uint64_t checkpoint, uint32_t shard, uint64_t tag) {
  char hex[24];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(tag));
  return prefix + padded(checkpoint) + ".shard-" + std::to_string(shard) + "." + hex + ".snap";
}

std::optional<store_file_name> parse_store_file_name(const std::string& name) {
  auto tmp = name.rfind(".tmp-");
  if (tmp == std::string::npos)
    return parse_final(name);
  if (tmp + 5 >= name.size())
    return std::nullopt;
  auto target = parse_final(name.substr(0, tmp));
  if (!target)
    return std::nullopt;
  target->kind = store_file_kind::temporary;
  return target;
}

}  // namespace keel
