#pragma once
// The properties every message that decode<S> accepts must have, whatever
// bytes it came from: decoding is deterministic (the same frame is accepted
// again), and acceptance is a property of the content, not of its layout
// (a deep copy of the message, every object once and in order as a capnp
// builder writes it, is accepted too, and copying the copy gives the same
// words). A broken property throws through invariant_broken.
//
// (Not capnp::canonicalize: it drops a struct list's all-zero data words,
// and a primitive list sent as such a struct list then no longer reads as a
// primitive list, so the canonical form of a valid message can be refused.)

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <capnp/message.h>
#include <kj/exception.h>

#include "invariant.hpp"
#include "messages/buffer_pool.hpp"
#include "messages/decode.hpp"

namespace keel::fuzz {

// The capnp stream encoding of a single-segment message made of `words`.
std::vector<unsigned char> single_segment_stream(kj::ArrayPtr<const capnp::word> words);

// The stream encoding `bytes` of a frame of `segments` segments, with the
// padding that ends an odd-sized segment table set to zero: readers ignore
// those four bytes and frame::encode_to writes zeros there.
std::vector<unsigned char> with_zero_table_padding(const uint8_t* bytes, size_t n, size_t segments);

// Options for re-reading an accepted message with its own traversal budget
// (so what decode already spent does not count): generous, and proportional
// to the frame the fuzz input made. A copy of that message is re-read with
// the same budget: being compact, a copy is smaller than its original, but
// walking it costs as much (a list of zero-sized structs is free to store
// and still costs a word per element to walk).
capnp::ReaderOptions rereading_options(const frame& original);

// The stream encoding of a deep copy of the root of `f` as schema S, in one
// segment, or nothing when the message holds more than a re-reading may walk
// (pointers that decode never follows may point anywhere, or many times at
// the same words).
template <class S>
std::vector<unsigned char> deep_copy(const frame& f, const capnp::ReaderOptions& options) {
  try {
    capnp::SegmentArrayMessageReader reader(f.segments(), options);
    auto root = reader.getRoot<S>();
    capnp::MallocMessageBuilder builder(static_cast<unsigned>(root.totalSize().wordCount + 1));
    builder.setRoot(root);
    auto segments = builder.getSegmentsForOutput();
    if (segments.size() != 1)
      return {};
    return single_segment_stream(segments[0]);
  } catch (const kj::Exception&) {
    return {};
  }
}

template <class S>
void check_accepted_message(const char* target, const frame_ptr& f, const decode_limits& limits,
                            buffer_pool& pool) {
  std::string name = schema_name<S>::value;
  require(static_cast<bool>(decode<S>(f, limits)), target,
          name + ": the same frame is refused on a second decode");
  auto options = rereading_options(*f);
  auto copy = deep_copy<S>(*f, options);
  if (copy.empty())
    return;
  auto copy_frame = frame::parse_copy(copy.data(), copy.size(), pool);
  require(static_cast<bool>(copy_frame), target,
          name + ": a deep copy does not parse as a frame: " +
            (copy_frame ? std::string() : describe(copy_frame.error())));
  auto again = decode<S>(*copy_frame, limits);
  require(static_cast<bool>(again), target,
          name + ": a deep copy of an accepted message is refused: " +
            (again ? std::string() : describe(again.error())));
  require(deep_copy<S>(**copy_frame, options) == copy, target,
          name + ": copying a deep copy gives different words");
}

}  // namespace keel::fuzz
