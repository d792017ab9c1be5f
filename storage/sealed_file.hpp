#pragma once
// A sealed file holds one Cap'n Proto message behind a 32-byte header that
// makes any damage detectable: a kind magic, a format version, the payload
// length and the payload's CRC32C, the header itself covered by its own
// CRC32C. Writing is atomic and durable (temporary file in the same
// directory, fsync, rename, fsync of the directory); after a crash at any
// point the final name holds the old contents or the new, never a mix.
// Reading checks header, length and CRC before the payload is parsed, and
// reports damage as errc::damaged_snapshot naming the file and the reason.
//
// Layout (little-endian):
//   0  u64 kind magic ("KEELSNAP" for snapshots, "KEELMANI" for manifests)
//   8  u16 format version (1)         10 u16 header bytes (32)
//   12 u32 reserved (0)               16 u64 payload bytes
//   24 u32 payload CRC32C             28 u32 CRC32C of bytes 0..27
//   32 payload: the capnp stream encoding (segment table, then segments)

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <caf/expected.hpp>

#include "messages/buffer_pool.hpp"
#include "messages/frame.hpp"
#include "storage/file_io.hpp"

namespace keel {

constexpr uint64_t snapshot_file_magic = 0x4b45454c534e4150;  // "KEELSNAP"
constexpr uint64_t manifest_file_magic = 0x4b45454c4d414e49;  // "KEELMANI"
constexpr uint16_t sealed_format_version = 1;
constexpr size_t sealed_header_bytes = 32;
// Writes and reads move at most this many bytes per call, so a large file
// is checksummed piece by piece while each piece is still in cache.
constexpr size_t sealed_io_piece_bytes = size_t{4} << 20;

// What a sealed file's header records; enough to check it against a manifest.
struct sealed_summary {
  uint64_t file_bytes = 0;
  uint32_t payload_crc32c = 0;
};

// Writes `message` as `dir/name` atomically and durably, through a temporary
// `dir/name.tmp-<tmp_tag>` that is removed on failure. On success the file
// and its directory entry are durable. An error names the file and the
// failed operation; if only the final directory fsync failed the file may
// exist under `name`, and the caller decides whether to keep it.
caf::expected<sealed_summary> write_sealed(file_io& io, const std::filesystem::path& dir,
                                           const std::string& name, uint64_t magic,
                                           const frame& message, const std::string& tmp_tag);

// A sealed file written by its producer piece by piece (a snapshot streamed
// straight from a shard's state: storage/snapshot_stream.hpp), not from a
// frame: the header for its payload of `payload_bytes` with CRC32C
// `payload_crc`, to be written at offset 0 last.
std::array<unsigned char, sealed_header_bytes> sealed_header(uint64_t magic, uint64_t payload_bytes,
                                                             uint32_t payload_crc);

// Makes such a file, written in full (header included) as `tmp`, durable
// as `dir/name`: fsync, close, rename over `name`, fsync of the directory.
// On failure `tmp` is removed and the error names `name` and the operation
// (a failed directory fsync leaves `name` in place, as write_sealed does).
caf::error commit_sealed(file_io& io, std::unique_ptr<writable_file> file, const std::filesystem::path& dir,
                         const std::string& name);

// What a sealed file of `message` holds in its header (its size and payload
// CRC), computed over the payload it would write, without writing: how a
// copy of a file's frame held in memory is checked against the file's record.
sealed_summary sealed_summary_of(const frame& message);

// A payload read back from a sealed file, parsed into a frame (not decoded).
struct sealed_contents {
  frame_ptr message;
  sealed_summary summary;
};

// Reads and checks `path`: header magic (must be `magic`), header CRC,
// version, that the file is exactly header + payload bytes long, and, if
// `check_payload_crc`, the payload CRC. The payload lands in a buffer from
// `pool`, so reading snapshot after snapshot reuses memory.
caf::expected<sealed_contents> read_sealed(file_io& io, const std::filesystem::path& path,
                                           uint64_t magic, buffer_pool& pool,
                                           bool check_payload_crc = true);

// "KEELSNAP" for a magic made of printable characters, else hex.
std::string magic_text(uint64_t magic);

}  // namespace keel
