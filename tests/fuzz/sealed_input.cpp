#include "sealed_input.hpp"

#include "storage/crc32c.hpp"
#include "storage/sealed_file.hpp"

namespace keel::fuzz {

namespace {

void put_le(unsigned char* p, uint64_t v, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i, v >>= 8)
    p[i] = static_cast<unsigned char>(v & 0xff);
}

}  // namespace

std::vector<unsigned char> seal(uint64_t magic, const uint8_t* payload, size_t n) {
  std::vector<unsigned char> file(sealed_header_bytes + n, 0);
  auto* h = file.data();
  for (int i = 7; i >= 0; --i, magic >>= 8)  // the magic is big-endian: "KEELSNAP" reads as text
    h[i] = static_cast<unsigned char>(magic & 0xff);
  put_le(h + 8, sealed_format_version, 2);
  put_le(h + 10, sealed_header_bytes, 2);
  put_le(h + 16, n, 8);
  put_le(h + 24, crc32c(payload, n), 4);
  put_le(h + 28, crc32c(h, 28), 4);
  for (size_t i = 0; i < n; ++i)
    file[sealed_header_bytes + i] = payload[i];
  return file;
}

}  // namespace keel::fuzz
