#pragma once
// Internals of storage/snapshot.cpp shared with storage/snapshot_stream.cpp:
// building a ShardSnapshot into an open frame_builder. Not installed, not an
// interface of its own: snapshot.hpp and snapshot_stream.hpp are.

#include <vector>

#include "messages/frame.hpp"
#include "storage/snapshot.hpp"

namespace keel {

// Builds the snapshot into `fb` with make_snapshot's checks. `fills[i]`,
// when not null, writes tensor i's bytes. With `external` null each fill runs
// now, into the message's chunks. Otherwise no fill runs: each chunk of a
// tensor with a fill is a segment of its own that references `external`
// (all of them the same memory, so the message is not readable until the
// caller has written each chunk elsewhere), and the tensor's builder, whose
// CRC is still to set, is appended to `filled_later`, in tensor order.
caf::error build_snapshot_into(frame_builder& fb, const snapshot_header& header, const std::vector<tensor_view>& tensors,
                               const std::vector<const tensor_fill*>& fills, const std::vector<section_view>& sections,
                               size_t chunk_bytes, const unsigned char* external,
                               std::vector<schema::Tensor::Builder>* filled_later);

// The words of a first segment that holds the whole message (with `external`,
// all but the chunks of tensors with a fill).
size_t snapshot_size_hint(const snapshot_header& header, const std::vector<tensor_view>& tensors,
                          const std::vector<const tensor_fill*>& fills, const std::vector<section_view>& sections,
                          size_t chunk_bytes, bool external);

}  // namespace keel
