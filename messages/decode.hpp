#pragma once
// Decoding never trusts the bytes. `decode` opens a frame with capnp reader
// limits set on purpose, checks the schema version, then validates every
// field the message's contract constrains (messages/validate.hpp). It returns
// either a reader over a message that satisfies its contract, or a keel error
// naming the first bad field ("keel.Push.dense[3]: ..."). It never throws and
// never reads out of bounds, whatever the bytes.

#include <memory>
#include <string>
#include <utility>

#include <caf/expected.hpp>
#include <capnp/message.h>
#include <kj/exception.h>

#include "messages/errors.hpp"
#include "messages/protocol.hpp"
#include "messages/validate.hpp"

namespace keel {

// A validated message: the frame stays alive as long as this object.
template <class S>
class decoded {
 public:
  typename S::Reader root() const { return root_; }
  const frame_ptr& source() const { return frame_; }

  decoded(frame_ptr f, std::unique_ptr<capnp::MessageReader> r, typename S::Reader root)
    : frame_(std::move(f)), reader_(std::move(r)), root_(root) {}

 private:
  frame_ptr frame_;
  std::unique_ptr<capnp::MessageReader> reader_;
  typename S::Reader root_;
};

namespace detail {
// Opens a reader over `f` whose traversal limit is proportional to the
// frame's size (validation and the handler each walk the message once).
std::unique_ptr<capnp::MessageReader> open_reader(const frame& f, const decode_limits& limits);
caf::error capnp_failure(const char* schema, const kj::Exception& e);
}  // namespace detail

template <class S>
caf::expected<decoded<S>> decode(const frame_ptr& f, const decode_limits& limits = {}) {
  if (f == nullptr)
    return make_error(errc::malformed_message, std::string(schema_name<S>::value) + ": empty message");
  try {
    auto reader = detail::open_reader(*f, limits);
    auto root = reader->template getRoot<S>();
    if (auto err = validate(root, limits))
      return err;
    return decoded<S>(f, std::move(reader), root);
  } catch (const kj::Exception& e) {
    return detail::capnp_failure(schema_name<S>::value, e);
  }
}

template <class S>
caf::expected<decoded<S>> decode(const msg<S>& m, const decode_limits& limits = {}) {
  return decode<S>(m.frame(), limits);
}

}  // namespace keel
