// fuzz_one_caf_deserialize: bytes -> caf::binary_deserializer -> msg<S> ->
// decode<S>, the path a message takes when it arrives from another process
// (see fuzz_targets.hpp).

#include <algorithm>
#include <vector>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "fuzz_targets.hpp"
#include "message_invariants.hpp"
#include "protocol_schemas.hpp"

namespace keel::fuzz {

namespace {

constexpr const char* target = "fuzz_caf_deserialize";

template <class S>
void load_as(const uint8_t* bytes, size_t n) {
  msg<S> m;
  caf::binary_deserializer source{nullptr, reinterpret_cast<const char*>(bytes), n};
  if (source(m))
    return;
  size_t consumed = n - source.remaining();
  // The length prefix is a varbyte that CAF may accept in a longer form than
  // it writes, so compare what follows it: the frame's own bytes.
  std::vector<char> saved;
  caf::binary_serializer sink{nullptr, saved};
  auto copy = m;
  require(!sink(copy), target, std::string(schema_name<S>::value) + ": a loaded msg does not save");
  size_t payload = m.empty() ? 0 : m.frame()->encoded_size_bytes();
  require(saved.size() >= payload && consumed >= payload && saved.size() <= consumed, target,
          std::string(schema_name<S>::value) + ": saving a loaded msg gives " +
            std::to_string(saved.size()) + " bytes for " + std::to_string(consumed) + " consumed");
  if (m.empty())
    return;
  auto loaded = with_zero_table_padding(bytes + consumed - payload, payload, m.frame()->segments().size());
  require(std::equal(loaded.begin(), loaded.end(),
                     reinterpret_cast<const unsigned char*>(saved.data()) + saved.size() - payload),
          target, std::string(schema_name<S>::value) + ": a loaded msg saves different frame bytes");
  decode_limits limits;
  if (!decode(m, limits))
    return;
  check_accepted_message<S>(target, m.frame(), limits, *buffer_pool::process_default());
}

}  // namespace

int fuzz_one_caf_deserialize(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  visit_schema(data[0], [&](auto tag) { load_as<typename decltype(tag)::type>(data + 1, size - 1); });
  return 0;
}

}  // namespace keel::fuzz
