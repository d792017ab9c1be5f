#pragma once
// A shard snapshot streamed into its file, never whole in memory: how a
// shard whose tables are large checkpoints without a second copy of its
// rows in its process (an embedding shard's memory is its tables; a
// snapshot built in memory first doubles it).
//
// The file is a sealed snapshot file as write_snapshot_file writes it
// (storage/sealed_file.hpp; every reader reads it), with one difference in
// the capnp layout only: each chunk of a tensor with a fill (tensor_writer)
// is a segment of its own. Steps:
//   1. the message without those chunks (dense tensors, counters, headers)
//      is built in memory;
//   2. each fill writes its tensor through one buffer of `chunk_bytes`
//      (span_source): each chunk, once complete, is written to the
//      temporary file at its place, with its CRC32C;
//   3. then the rest of the message and the segment table, and last the
//      header with the payload's CRC32C, combined from the pieces'.
// Nothing is fsynced: commit_streamed makes the file durable under its
// name, on whatever thread the caller likes (a shard's writer). Memory: the
// message without the chunks, one chunk buffer, 8 bytes a chunk.
//
// A failure (an I/O error naming the file and the operation; a fill that
// throws or writes a size other than its tensor's, errc::invalid_argument)
// removes the temporary file. Unlike a snapshot in memory, a failed stream
// cannot be written again: its bytes came from state that has moved on.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "storage/checkpoint_files.hpp"
#include "storage/file_io.hpp"
#include "storage/sealed_file.hpp"
#include "storage/snapshot.hpp"

namespace keel {

// A snapshot file written in full as a temporary file, not yet durable.
struct streamed_snapshot {
  std::unique_ptr<writable_file> file;  // `dir/name.tmp-<tag>`, open
  std::filesystem::path dir;
  std::string name;  // the name commit_streamed gives it
  uint32_t shard = 0;
  sealed_summary summary;
};

// Writes the snapshot of `header`, `tensors` (copied) and `written` (each
// fill run once, during the call) as `dir/name.tmp-<tmp_tag>`.
caf::expected<streamed_snapshot> stream_snapshot(file_io& io, const std::filesystem::path& dir,
                                                 const std::string& name, const std::string& tmp_tag,
                                                 const snapshot_header& header,
                                                 const std::vector<tensor_view>& tensors,
                                                 const std::vector<tensor_writer>& written,
                                                 size_t chunk_bytes = default_chunk_bytes);

// fsync, rename to its name, fsync of the directory (commit_sealed); the
// entry a manifest records for it. On failure the temporary file is gone.
caf::expected<manifest_entry> commit_streamed(file_io& io, streamed_snapshot s);

}  // namespace keel
