#pragma once
// msg<S> is the CAF message element that carries one capnp message of schema
// struct S. Locally it holds a shared frame, so sending it copies no bytes;
// across processes CAF's serializer writes the frame's capnp stream encoding
// and the receiving side parses it into a pooled buffer. The schema type is
// part of the C++ type, so an actor's handler names the struct it takes:
//   [](const keel::msg<keel::schema::Push>& m) { auto push = keel::decode(m); ... }
// A received msg is untrusted until `decode` (messages/decode.hpp) accepts it.

#include <string>
#include <type_traits>
#include <utility>

#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>

#include "messages/frame.hpp"

namespace keel {

// The registered CAF type name of schema struct S ("keel.Push", ...);
// specialised in messages/protocol.hpp for every protocol message.
template <class S>
struct schema_name;

template <class S>
class msg {
 public:
  using schema_type = S;

  msg() = default;
  explicit msg(frame_ptr f) : frame_(std::move(f)) {}

  const frame_ptr& frame() const { return frame_; }
  bool empty() const { return frame_ == nullptr; }

 private:
  template <class Inspector, class T>
  friend typename Inspector::result_type inspect(Inspector& f, msg<T>& x);
  frame_ptr frame_;
};

namespace detail {

// Reads a frame's stream encoding from a CAF deserializer into a pooled
// buffer, refusing sizes above max_frame_bytes before allocating.
caf::error load_frame(caf::deserializer& source, frame_ptr& out);
// Writes a frame's stream encoding through a CAF serializer. An empty msg is
// written as zero bytes and loads back as empty.
caf::error save_frame(caf::serializer& sink, const frame_ptr& in);
std::string describe_frame(const char* name, const frame_ptr& f);

}  // namespace detail

template <class Inspector, class S>
typename Inspector::result_type inspect(Inspector& f, msg<S>& x) {
  if constexpr (std::is_same<typename Inspector::result_type, void>::value) {
    // CAF's to_string: a summary, never the bytes.
    auto text = detail::describe_frame(schema_name<S>::value, x.frame_);
    f(caf::meta::type_name(schema_name<S>::value), text);
  } else if constexpr (Inspector::reads_state) {
    return detail::save_frame(f, x.frame_);
  } else {
    return detail::load_frame(f, x.frame_);
  }
}

}  // namespace keel
