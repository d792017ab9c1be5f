#pragma once
// The fuzz entry points: one function per family of decoders that read
// untrusted bytes. Each takes any byte string, runs it through keel's real
// decoding path, and checks the properties that must hold whatever the
// bytes: the decoder returns an error value or a result (never throws, never
// reads out of bounds, never leaks), and a result it accepts satisfies the
// invariants listed with each function. A broken invariant throws an
// invariant_violation saying what broke (invariant.hpp): the libFuzzer
// programs (libfuzzer_main.cpp) abort on it, which libFuzzer records as a
// crash, and the replay test (replay_test.cpp) fails a check naming the
// input. Both call the same functions, so a crash input saved under
// regressions/ is re-run by CI without libFuzzer. Every function returns 0
// (libFuzzer's convention).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace keel::fuzz {

// Byte 0 picks the schema (byte % 10, in the order of messages/protocol.hpp:
// Push, PushAck, PullRequest, PullReply, SnapshotRequest, ShardSnapshot,
// CheckpointManifest, DirectoryUpdate, Heartbeat, NodeJoin);
// the rest is a capnp stream encoding given to frame::parse_copy and then to
// decode<S>. Invariants: a parsed frame re-encodes to the very bytes it was
// parsed from (but for the segment table's padding); an accepted message is
// accepted again, and so is its deep copy (message_invariants.hpp).
int fuzz_one_frame_decode(const uint8_t* data, size_t size);

// Byte 0 picks the schema as above; the rest is what CAF's
// binary_deserializer loads a msg<S> from (what arrives from another
// process). Invariants of a load that succeeds: saving the msg gives back
// exactly the bytes the load consumed; a non-empty msg goes on to decode<S>
// with the invariants of fuzz_one_frame_decode.
int fuzz_one_caf_deserialize(const uint8_t* data, size_t size);

// Byte 0 holds flags (see snapshot_file_target.cpp): whether the rest is a
// whole sealed snapshot file or only its payload (sealed by the harness with
// correct lengths and CRCs, so mutations reach the decoder behind the
// checksums), the verify_mode, and the optimizer of the shard to restore.
// The file is read with read_snapshot_file from memory; an accepted
// snapshot passes verify_checksums and is restored with restore_shard into a
// shard configured from its own claims. Invariants: the recorded size is the
// file's size; a restored shard snapshotted and restored again has the same
// state.
int fuzz_one_snapshot_file(const uint8_t* data, size_t size);

// Byte 0 holds flags (whole file or payload only, as above); the file is read
// with read_manifest_file from memory. Invariants of an accepted manifest:
// entries sorted by shard with no shard twice, plain file names; written
// back with write_manifest_file it reads back equal.
int fuzz_one_manifest_file(const uint8_t* data, size_t size);

// Byte 0 holds flags (see shard_messages_target.cpp): whether the rest is a
// Push or a PullRequest (a capnp stream encoding), and the consistency rule
// and optimizer of a small shard. An accepted Push is offered to the shard,
// an accepted PullRequest answered by it: the handlers walk the decoded
// message after decode. Invariants: a push is applied at most once (offered
// again it is a duplicate and changes nothing) and a refused one changes
// nothing; a shard's reply to a pull is accepted by decode<PullReply>.
int fuzz_one_shard_messages(const uint8_t* data, size_t size);

// Byte 0 holds flags (table_delta_input.hpp): whether the harness reseals
// the delta's CRC, and the parent table's capacity, admission filter and
// optimizer; the rest is a table delta (actors/core/table_delta.hpp) applied
// with apply_table_delta to a fixed parent table. Invariants: a refused
// delta leaves the table as it was; an accepted one leaves it valid (its
// full snapshot decodes back to it), with no row marked changed, and
// applied to the parent again gives the same table.
int fuzz_one_table_delta(const uint8_t* data, size_t size);

using fuzz_entry = int (*)(const uint8_t*, size_t);

struct fuzz_target {
  const char* name;  // the libFuzzer program and its corpus directory
  fuzz_entry entry;
};

// Every target, in a fixed order.
const std::vector<fuzz_target>& all_targets();

}  // namespace keel::fuzz
