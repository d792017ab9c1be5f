#include "storage/sealed_file.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <vector>

#include "messages/errors.hpp"
#include "storage/crc32c.hpp"
#include "storage/error_context.hpp"

namespace keel {

namespace fs = std::filesystem;

namespace {

// The magic is stored big-endian so the file starts with the readable
// "KEELSNAP"; every other field is little-endian like capnp's own framing.
void put_be64(unsigned char* p, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8)
    p[i] = static_cast<unsigned char>(v & 0xff);
}

uint64_t get_be64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v = (v << 8) | p[i];
  return v;
}

template <class T>
void put_le(unsigned char* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i, v = static_cast<T>(v >> 8))
    p[i] = static_cast<unsigned char>(v & 0xff);
}

template <class T>
T get_le(const unsigned char* p) {
  T v = 0;
  for (size_t i = sizeof(T); i-- > 0;)
    v = static_cast<T>((v << 8) | p[i]);
  return v;
}

struct header_fields {
  uint64_t magic = 0;
  uint16_t version = 0;
  uint16_t header_bytes = 0;
  uint64_t payload_bytes = 0;
  uint32_t payload_crc = 0;
  uint32_t header_crc = 0;
};

void encode_header(const header_fields& h, unsigned char* out) {
  std::memset(out, 0, sealed_header_bytes);
  put_be64(out, h.magic);
  put_le<uint16_t>(out + 8, h.version);
  put_le<uint16_t>(out + 10, h.header_bytes);
  put_le<uint64_t>(out + 16, h.payload_bytes);
  put_le<uint32_t>(out + 24, h.payload_crc);
  put_le<uint32_t>(out + 28, crc32c(out, 28));
}

header_fields decode_header(const unsigned char* in) {
  header_fields h;
  h.magic = get_be64(in);
  h.version = get_le<uint16_t>(in + 8);
  h.header_bytes = get_le<uint16_t>(in + 10);
  h.payload_bytes = get_le<uint64_t>(in + 16);
  h.payload_crc = get_le<uint32_t>(in + 24);
  h.header_crc = get_le<uint32_t>(in + 28);
  return h;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

caf::error damaged(const fs::path& p, const std::string& why) {
  return make_error(errc::damaged_snapshot, p.filename().string() + ": " + why);
}

// Writes `n` bytes at `offset` in pieces, extending `crc` over each piece
// just before it is written, while it is in cache.
caf::error write_pieces(writable_file& f, uint64_t& offset, const void* data, size_t n,
                        uint32_t& crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (n > 0) {
    size_t piece = n < sealed_io_piece_bytes ? n : sealed_io_piece_bytes;
    crc = crc32c_extend(crc, p, piece);
    if (auto err = f.write_at(offset, p, piece))
      return err;
    p += piece;
    n -= piece;
    offset += piece;
  }
  return {};
}

// The capnp stream encoding's segment table of `m`: the payload's first bytes.
std::vector<unsigned char> segment_table(const frame& m) {
  auto segments = m.segments();
  size_t table_words = (segments.size() + 2) / 2;
  std::vector<unsigned char> table(table_words * sizeof(capnp::word), 0);
  put_le<uint32_t>(table.data(), static_cast<uint32_t>(segments.size() - 1));
  for (size_t i = 0; i < segments.size(); ++i)
    put_le<uint32_t>(table.data() + 4 + 4 * i, static_cast<uint32_t>(segments[i].size()));
  return table;
}

// Writes header and payload into the open temporary file (commit_sealed
// fsyncs it). The header goes last: until then the file starts with zeros,
// which no reader accepts.
caf::expected<sealed_summary> fill(writable_file& f, uint64_t magic, const frame& m) {
  auto segments = m.segments();
  auto table = segment_table(m);
  uint64_t offset = sealed_header_bytes;
  uint32_t crc = crc32c_empty;
  if (auto err = write_pieces(f, offset, table.data(), table.size(), crc))
    return err;
  for (auto& s : segments)
    if (auto err = write_pieces(f, offset, s.begin(), s.size() * sizeof(capnp::word), crc))
      return err;
  header_fields h;
  h.magic = magic;
  h.version = sealed_format_version;
  h.header_bytes = sealed_header_bytes;
  h.payload_bytes = offset - sealed_header_bytes;
  h.payload_crc = crc;
  unsigned char header[sealed_header_bytes];
  encode_header(h, header);
  if (auto err = f.write_at(0, header, sizeof(header)))
    return err;
  return sealed_summary{offset, crc};
}

caf::error check_header(const fs::path& p, const header_fields& h, const unsigned char* raw,
                        uint64_t magic, uint64_t file_bytes) {
  if (h.magic != magic)
    return damaged(p, "wrong magic " + magic_text(h.magic) + " at offset 0 (expected " +
                        magic_text(magic) + ")");
  auto crc = crc32c(raw, 28);
  if (crc != h.header_crc)
    return damaged(p, "header CRC32C mismatch (stored " + hex32(h.header_crc) + ", computed " +
                        hex32(crc) + "): the header is damaged");
  if (h.version != sealed_format_version || h.header_bytes != sealed_header_bytes)
    return make_error(errc::unsupported_version,
                      p.filename().string() + ": file format version " + std::to_string(h.version) +
                        " with a " + std::to_string(h.header_bytes) +
                        "-byte header (this build reads version 1, 32 bytes)");
  if (file_bytes - sealed_header_bytes != h.payload_bytes)
    return damaged(p, "length mismatch: the header promises " + std::to_string(h.payload_bytes) +
                        " payload bytes, the file holds " +
                        std::to_string(file_bytes - sealed_header_bytes) +
                        (file_bytes - sealed_header_bytes < h.payload_bytes ? " (truncated)"
                                                                            : " (extended)"));
  if (h.payload_bytes % sizeof(capnp::word) != 0 || h.payload_bytes < sizeof(capnp::word))
    return damaged(p, "payload of " + std::to_string(h.payload_bytes) +
                        " bytes is not a whole number of capnp words");
  return {};
}

}  // namespace

std::string magic_text(uint64_t magic) {
  std::string s(8, ' ');
  bool printable = true;
  for (int i = 0; i < 8; ++i) {
    auto c = static_cast<unsigned char>((magic >> (56 - 8 * i)) & 0xff);
    printable = printable && std::isprint(c) != 0;
    s[static_cast<size_t>(i)] = static_cast<char>(c);
  }
  if (printable)
    return "\"" + s + "\"";
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(magic));
  return buf;
}

sealed_summary sealed_summary_of(const frame& message) {
  auto table = segment_table(message);
  uint32_t crc = crc32c(table.data(), table.size());
  uint64_t bytes = sealed_header_bytes + table.size();
  for (auto& s : message.segments()) {
    crc = crc32c_extend(crc, s.begin(), s.size() * sizeof(capnp::word));
    bytes += s.size() * sizeof(capnp::word);
  }
  return sealed_summary{bytes, crc};
}

caf::expected<sealed_summary> write_sealed(file_io& io, const fs::path& dir,
                                           const std::string& name, uint64_t magic,
                                           const frame& message, const std::string& tmp_tag) {
  auto tmp = dir / (name + ".tmp-" + tmp_tag);
  auto context = [&](const caf::error& e) { return in_context(e, "writing " + name + ": "); };
  auto file = io.create(tmp);
  if (!file)
    return context(file.error());
  auto summary = fill(**file, magic, message);
  if (!summary) {
    file->reset();
    io.remove(tmp);  // best effort: open() removes what is left
    return context(summary.error());
  }
  if (auto err = commit_sealed(io, std::move(*file), dir, name))
    return err;
  return summary;
}

std::array<unsigned char, sealed_header_bytes> sealed_header(uint64_t magic, uint64_t payload_bytes,
                                                             uint32_t payload_crc) {
  header_fields h;
  h.magic = magic;
  h.version = sealed_format_version;
  h.header_bytes = sealed_header_bytes;
  h.payload_bytes = payload_bytes;
  h.payload_crc = payload_crc;
  std::array<unsigned char, sealed_header_bytes> out{};
  encode_header(h, out.data());
  return out;
}

caf::error commit_sealed(file_io& io, std::unique_ptr<writable_file> file, const fs::path& dir,
                         const std::string& name) {
  auto context = [&](const caf::error& e) { return in_context(e, "writing " + name + ": "); };
  const fs::path tmp = file->path();
  if (auto err = file->sync()) {
    file.reset();
    io.remove(tmp);
    return context(err);
  }
  file.reset();  // close before rename
  if (auto err = io.rename(tmp, dir / name)) {
    io.remove(tmp);
    return context(err);
  }
  if (auto err = io.sync_dir(dir))
    return context(err);
  return {};
}

caf::expected<sealed_contents> read_sealed(file_io& io, const fs::path& path, uint64_t magic,
                                           buffer_pool& pool, bool check_payload_crc) {
  auto file = io.open(path);
  if (!file && is(file.error(), errc::invalid_argument))  // a FIFO, a device, a link: not a sealed file
    return make_error(errc::damaged_snapshot, error_text(file.error()));
  if (!file)
    return std::move(file.error());
  auto size = (*file)->size();
  if (!size)
    return std::move(size.error());
  if (*size < sealed_header_bytes)
    return damaged(path, "truncated to " + std::to_string(*size) + " bytes, shorter than the " +
                           std::to_string(sealed_header_bytes) + "-byte header");
  unsigned char raw[sealed_header_bytes];
  if (auto err = (*file)->read_at(0, raw, sizeof(raw)))
    return err;
  auto h = decode_header(raw);
  if (auto err = check_header(path, h, raw, magic, *size))
    return err;
  auto buf = pool.acquire(h.payload_bytes / sizeof(capnp::word));
  uint32_t crc = crc32c_empty;
  for (uint64_t done = 0; done < h.payload_bytes;) {
    auto piece = static_cast<size_t>(std::min<uint64_t>(sealed_io_piece_bytes, h.payload_bytes - done));
    if (auto err = (*file)->read_at(sealed_header_bytes + done, buf.bytes() + done, piece))
      return err;
    if (check_payload_crc)
      crc = crc32c_extend(crc, buf.bytes() + done, piece);
    done += piece;
  }
  if (check_payload_crc && crc != h.payload_crc)
    return damaged(path, "payload CRC32C mismatch (header says " + hex32(h.payload_crc) +
                           ", the bytes give " + hex32(crc) + "): a bit flip or torn write");
  auto parsed = frame::parse(std::move(buf), h.payload_bytes);
  if (!parsed)
    return damaged(path, describe(parsed.error()));
  return sealed_contents{std::move(*parsed), sealed_summary{*size, h.payload_crc}};
}

}  // namespace keel
