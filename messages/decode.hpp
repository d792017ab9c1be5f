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
// The traversal budget of a decoded message, in words: proportional to the
// frame's size (limits.traversal_limit_factor words per word, plus 1024).
uint64_t traversal_budget_words(const frame& f, const decode_limits& limits);
// Opens a reader over `f` that may walk `traversal_limit_words` words.
std::unique_ptr<capnp::MessageReader> open_reader(const frame& f, uint64_t traversal_limit_words);
caf::error capnp_failure(const char* schema, const kj::Exception& e);
}  // namespace detail

template <class S>
caf::expected<decoded<S>> decode(const frame_ptr& f, const decode_limits& limits = {}) {
  if (f == nullptr)
    return make_error(errc::malformed_message, std::string(schema_name<S>::value) + ": empty message");
  try {
    // Validation walks the message on a reader with half the budget, and the
    // handler gets a fresh reader with all of it. Pointers may share words,
    // so that every walk reads them again: on one shared reader such a
    // message could pass validation and then run out of budget part-way
    // through the handler's walk, where kj throws (a 2 KiB Push did this in
    // shard_core::offer: tests/fuzz/regressions/fuzz_shard_messages). This
    // way whatever validation could walk, the handler can walk twice.
    auto budget = detail::traversal_budget_words(*f, limits);
    auto checked = detail::open_reader(*f, budget / 2);
    decode_limits of_f = limits;
    of_f.source = f.get();
    if (auto err = validate(checked->template getRoot<S>(), of_f))
      return err;
    auto reader = detail::open_reader(*f, budget);
    auto root = reader->template getRoot<S>();
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
