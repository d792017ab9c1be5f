// fuzz_one_frame_decode: bytes -> frame::parse_copy -> decode<S>, the path a
// message takes when keel reads it from bytes (see fuzz_targets.hpp).

#include <cstring>
#include <vector>

#include "fuzz_targets.hpp"
#include "message_invariants.hpp"
#include "protocol_schemas.hpp"

namespace keel::fuzz {

namespace {

constexpr const char* target = "fuzz_frame_decode";

// One pool for the whole run, as in a receiving process: buffers are reused
// across inputs, so a frame still reading a buffer it gave back would see
// the next input's bytes and break an invariant.
buffer_pool& frame_pool() {
  static const auto pool = buffer_pool::create(size_t{16} << 20);
  return *pool;
}

template <class S>
void decode_as(const uint8_t* bytes, size_t n) {
  auto f = frame::parse_copy(bytes, n, frame_pool());
  if (!f)
    return;
  std::vector<unsigned char> encoded((*f)->encoded_size_bytes());
  require(encoded.size() == n, target, "a parsed frame's encoding has a different length");
  (*f)->encode_to(encoded.data());
  require(encoded == with_zero_table_padding(bytes, n, (*f)->segments().size()), target,
          "a parsed frame does not re-encode to the bytes it was parsed from");
  decode_limits limits;
  if (!decode<S>(*f, limits))
    return;
  check_accepted_message<S>(target, *f, limits, frame_pool());
}

}  // namespace

int fuzz_one_frame_decode(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  visit_schema(data[0], [&](auto tag) { decode_as<typename decltype(tag)::type>(data + 1, size - 1); });
  return 0;
}

}  // namespace keel::fuzz
