#pragma once
// A frame is one immutable Cap'n Proto message: its segments and the pooled
// memory that holds them. Frames are shared by reference count
// (`frame_ptr`), so passing one between local actors copies no bytes. A frame
// is made either by `frame_builder::finish()` or by `frame::parse()` from the
// standard capnp stream encoding (what crosses process boundaries). A frame
// is never modified after it is made, so any thread may read it.

#include <cstddef>
#include <memory>
#include <vector>

#include <caf/expected.hpp>
#include <capnp/message.h>
#include <capnp/orphan.h>

#include "messages/buffer_pool.hpp"

namespace keel {

class frame;
using frame_ptr = std::shared_ptr<const frame>;

// Largest frame keel accepts from bytes: anything larger is refused before
// any memory is allocated for it.
constexpr size_t max_frame_bytes = size_t{1} << 30;

class frame {
 public:
  using segment = kj::ArrayPtr<const capnp::word>;

  // The message's segments, in order.
  kj::ArrayPtr<const segment> segments() const {
    return kj::ArrayPtr<const segment>(segments_.data(), segments_.size());
  }

  // Total payload words over all segments.
  size_t size_words() const;

  // Size of the capnp stream encoding (segment table + segments) in bytes.
  size_t encoded_size_bytes() const;

  // Writes the capnp stream encoding into `out`, which must hold
  // `encoded_size_bytes()` bytes.
  void encode_to(unsigned char* out) const;

  // Parses the capnp stream encoding held in the first `n_bytes` of `buf`
  // and takes ownership of `buf`. Checks the segment table against the length;
  // an inconsistent table yields errc::malformed_message naming the problem.
  static caf::expected<frame_ptr> parse(pooled_buffer buf, size_t n_bytes);

  // Copies `n_bytes` of stream encoding into a buffer from `pool`, then parses.
  static caf::expected<frame_ptr> parse_copy(const void* data, size_t n_bytes,
                                             buffer_pool& pool);

  // True if the `n_bytes` at `p` lie inside float32 values this frame's
  // builder copied in and found finite (frame_builder::copy_floats). Such
  // values need no NaN/Inf scan when the frame is validated: the frame is
  // immutable and owns those bytes. A frame parsed from bytes knows nothing.
  bool known_finite(const void* p, size_t n_bytes) const;

  frame(const frame&) = delete;
  frame& operator=(const frame&) = delete;
  ~frame();

 private:
  friend class frame_builder;
  frame() = default;
  struct byte_range {
    const unsigned char* begin;
    size_t size;
  };
  std::vector<byte_range> finite_;
  std::vector<segment> segments_;
  std::vector<pooled_buffer> buffers_;
  std::unique_ptr<capnp::MessageBuilder> builder_;  // set for built frames
};

// Builds one capnp message in pooled memory. Give a size hint so a large
// message lands in a single segment. Not thread-safe; single use.
class frame_builder {
 public:
  explicit frame_builder(size_t size_hint_words = 1024,
                         std::shared_ptr<buffer_pool> pool = buffer_pool::process_default());
  ~frame_builder();

  capnp::MessageBuilder& message();

  // Makes the first `n_bytes` of `buf` the value of a Data field without
  // copying them: adopt the returned orphan into the field
  // (`range.adoptValues(fb.adopt_data(...))`). The frame keeps `buf` alive;
  // the bytes must not change afterwards. This is how large gradients enter
  // a push at no copy. Throws std::invalid_argument if `n_bytes` exceeds `buf`.
  capnp::Orphan<capnp::Data> adopt_data(pooled_buffer buf, size_t n_bytes);
  // A Data field whose value is the `n_bytes` at `bytes`, which the caller
  // owns and keeps alive and unchanged while the message is read or
  // written; its own segment of whole words (the caller's memory must hold
  // them, padding included). How a snapshot streamed to a file
  // (storage/snapshot_stream.hpp) names chunks it writes later.
  capnp::Orphan<capnp::Data> reference_data(const unsigned char* bytes, size_t n_bytes);
  // Copies `n_bytes` from `bytes` into a pooled buffer of their own and
  // adopts it as above: one pass over the bytes, where a Data field the
  // message allocates is zero-filled first and then written (two passes).
  // How a worker puts a slice of its gradient into a push.
  capnp::Orphan<capnp::Data> copy_data(const void* bytes, size_t n_bytes);
  // copy_data for `n` float32 values that also checks them in the same pass
  // (a block is scanned while it is still in cache): `*finite` says whether
  // every value is finite, and if so the frame remembers it (known_finite),
  // so decoding it in this process skips the scan.
  capnp::Orphan<capnp::Data> copy_floats(const float* values, size_t n, bool* finite);

  // Seals the message into an immutable frame; the builder is spent.
  frame_ptr finish();

 private:
  std::unique_ptr<capnp::MessageBuilder> builder_;
  std::vector<pooled_buffer> adopted_;
  std::vector<frame::byte_range> finite_;
  std::shared_ptr<buffer_pool> pool_;
};

}  // namespace keel
