#include "messages/decode.hpp"

#include <caf/deserializer.hpp>
#include <caf/serializer.hpp>

namespace keel {

namespace detail {

std::unique_ptr<capnp::MessageReader> open_reader(const frame& f, const decode_limits& limits) {
  capnp::ReaderOptions opts;
  opts.traversalLimitInWords = limits.traversal_limit_factor * f.size_words() + 1024;
  opts.nestingLimit = 16;  // keel's schemas nest at most 4 deep
  return std::make_unique<capnp::SegmentArrayMessageReader>(f.segments(), opts);
}

caf::error capnp_failure(const char* schema, const kj::Exception& e) {
  return make_error(errc::malformed_message, std::string(schema) + ": " + e.getDescription().cStr());
}

caf::error save_frame(caf::serializer& sink, const frame_ptr& in) {
  size_t n = in ? in->encoded_size_bytes() : 0;
  if (auto err = sink.begin_sequence(n))
    return err;
  if (n > 0) {
    // One contiguous write through CAF's raw path. A single-segment frame
    // still needs its table in front, so encode into a pooled scratch buffer.
    auto scratch = buffer_pool::process_default()->acquire(n / sizeof(capnp::word));
    in->encode_to(scratch.bytes());
    if (auto err = sink.apply_raw(n, scratch.bytes()))
      return err;
  }
  return sink.end_sequence();
}

caf::error load_frame(caf::deserializer& source, frame_ptr& out) {
  size_t n = 0;
  if (auto err = source.begin_sequence(n))
    return err;
  if (n == 0) {
    out.reset();
    return source.end_sequence();
  }
  if (n > max_frame_bytes)
    return make_error(errc::limit_exceeded, "capnp frame of " + std::to_string(n) +
                                              " bytes exceeds the limit of " +
                                              std::to_string(max_frame_bytes));
  auto buf = buffer_pool::process_default()->acquire((n + sizeof(capnp::word) - 1) / sizeof(capnp::word));
  if (auto err = source.apply_raw(n, buf.bytes()))
    return err;
  auto parsed = frame::parse(std::move(buf), n);
  if (!parsed)
    return std::move(parsed.error());
  out = std::move(*parsed);
  return source.end_sequence();
}

std::string describe_frame(const char* name, const frame_ptr& f) {
  if (!f)
    return std::string(name) + "(empty)";
  return std::string(name) + "(" + std::to_string(f->size_words() * sizeof(capnp::word)) + " bytes)";
}

}  // namespace detail

}  // namespace keel
