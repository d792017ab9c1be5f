#include "messages/decode.hpp"

#include <caf/binary_deserializer.hpp>
#include <caf/deserializer.hpp>
#include <caf/serializer.hpp>

namespace keel {

namespace detail {

uint64_t traversal_budget_words(const frame& f, const decode_limits& limits) {
  return limits.traversal_limit_factor * f.size_words() + 1024;
}

std::unique_ptr<capnp::MessageReader> open_reader(const frame& f, uint64_t traversal_limit_words) {
  capnp::ReaderOptions opts;
  opts.traversalLimitInWords = traversal_limit_words;
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
    // The stream encoding written piecewise: segment table, then each
    // segment straight from the frame, so no intermediate copy is made.
    // (apply_raw takes a non-const pointer but only reads when saving.)
    auto segs = in->segments();
    std::vector<uint32_t> table((segs.size() + 2) / 2 * 2, 0);
    table[0] = static_cast<uint32_t>(segs.size() - 1);
    for (size_t i = 0; i < segs.size(); ++i)
      table[i + 1] = static_cast<uint32_t>(segs[i].size());
    if (auto err = sink.apply_raw(table.size() * 4, table.data()))
      return err;
    for (auto& s : segs)
      if (auto err = sink.apply_raw(s.size() * sizeof(capnp::word), const_cast<capnp::word*>(s.begin())))
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
  // The length is the sender's claim: a few bytes claiming a 1 GiB frame
  // must not make us allocate 1 GiB before apply_raw finds the bytes missing
  // (found by tests/fuzz). A binary_deserializer, which CAF's middleman uses,
  // knows how many bytes it still holds; other deserializers read from a
  // stream and cannot tell, and are bounded by max_frame_bytes alone.
  if (auto* bytes = dynamic_cast<caf::binary_deserializer*>(&source); bytes != nullptr && n > bytes->remaining())
    return make_error(errc::malformed_message, "capnp frame of " + std::to_string(n) +
                                                 " bytes, but only " + std::to_string(bytes->remaining()) +
                                                 " bytes follow");
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
