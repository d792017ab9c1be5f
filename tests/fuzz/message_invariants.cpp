#include "message_invariants.hpp"

#include <cstring>

namespace keel::fuzz {

std::vector<unsigned char> single_segment_stream(kj::ArrayPtr<const capnp::word> words) {
  // Segment table of one entry: (count - 1) = 0, then the segment's size.
  std::vector<unsigned char> out(sizeof(capnp::word) + words.size() * sizeof(capnp::word), 0);
  auto size_words = static_cast<uint32_t>(words.size());
  std::memcpy(out.data() + 4, &size_words, 4);
  if (words.size() > 0)
    std::memcpy(out.data() + sizeof(capnp::word), words.begin(), words.size() * sizeof(capnp::word));
  return out;
}

std::vector<unsigned char> with_zero_table_padding(const uint8_t* bytes, size_t n, size_t segments) {
  std::vector<unsigned char> out(bytes, bytes + n);
  if (segments % 2 == 0 && n >= 8 + 4 * segments)
    std::memset(out.data() + 4 + 4 * segments, 0, 4);
  return out;
}

capnp::ReaderOptions rereading_options(const frame& original) {
  capnp::ReaderOptions opts;
  // decode allows 8-16 walks of the frame; copying after it may take as many
  // again. Inputs are small (libFuzzer's -max_len), so this stays small.
  opts.traversalLimitInWords = 64 * original.size_words() + 4096;
  opts.nestingLimit = 64;
  return opts;
}

}  // namespace keel::fuzz
