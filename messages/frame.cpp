#include "messages/frame.hpp"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "messages/errors.hpp"
#include "messages/validate.hpp"

namespace keel {

namespace {

// A MessageBuilder whose segments come from a buffer_pool. The first segment
// is as large as the caller's hint; later ones double the message so far, as
// capnp's own allocator does.
class pooled_message_builder final : public capnp::MessageBuilder {
 public:
  pooled_message_builder(size_t first_words, std::shared_ptr<buffer_pool> pool)
    : next_words_(first_words < 64 ? 64 : first_words), pool_(std::move(pool)) {}

  kj::ArrayPtr<capnp::word> allocateSegment(unsigned minimum_size) override {
    size_t want = minimum_size > next_words_ ? minimum_size : next_words_;
    auto buf = pool_->acquire(want);
    // Only the requested words must be zero; the pool's size class may be
    // larger, and the rest is never handed to capnp.
    buf.zero(want);
    kj::ArrayPtr<capnp::word> seg(buf.words(), want);
    total_words_ += want;
    next_words_ = total_words_;
    buffers_.push_back(std::move(buf));
    return seg;
  }

  std::vector<pooled_buffer> take_buffers() { return std::move(buffers_); }

 private:
  size_t next_words_;
  size_t total_words_ = 0;
  std::shared_ptr<buffer_pool> pool_;
  std::vector<pooled_buffer> buffers_;
};

uint32_t read_u32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // capnp framing is little-endian; keel builds only for LE hosts
}

}  // namespace

frame::~frame() = default;

size_t frame::size_words() const {
  size_t n = 0;
  for (auto& s : segments_)
    n += s.size();
  return n;
}

size_t frame::encoded_size_bytes() const {
  // Table: segment count - 1, one size per segment, padded to a whole word.
  size_t table_words = (segments_.size() + 2) / 2;
  return (table_words + size_words()) * sizeof(capnp::word);
}

void frame::encode_to(unsigned char* out) const {
  size_t table_words = (segments_.size() + 2) / 2;
  std::memset(out, 0, table_words * sizeof(capnp::word));
  uint32_t count_minus_one = static_cast<uint32_t>(segments_.size() - 1);
  std::memcpy(out, &count_minus_one, 4);
  for (size_t i = 0; i < segments_.size(); ++i) {
    uint32_t sz = static_cast<uint32_t>(segments_[i].size());
    std::memcpy(out + 4 + 4 * i, &sz, 4);
  }
  out += table_words * sizeof(capnp::word);
  for (auto& s : segments_) {
    std::memcpy(out, s.begin(), s.size() * sizeof(capnp::word));
    out += s.size() * sizeof(capnp::word);
  }
}

caf::expected<frame_ptr> frame::parse(pooled_buffer buf, size_t n_bytes) {
  auto fail = [&](std::string what) {
    return make_error(errc::malformed_message,
                      "capnp frame of " + std::to_string(n_bytes) + " bytes: " + what);
  };
  if (n_bytes > buf.size_bytes())
    return fail("longer than its buffer");
  if (n_bytes % sizeof(capnp::word) != 0)
    return fail("length is not a multiple of 8");
  if (n_bytes < sizeof(capnp::word))
    return fail("too short for a segment table");
  const unsigned char* p = buf.bytes();
  uint64_t count = uint64_t{read_u32(p)} + 1;
  // capnp itself refuses more than 512 segments; so do we, before trusting
  // the count to size anything.
  if (count > 512)
    return fail("segment count " + std::to_string(count) + " exceeds 512");
  size_t table_words = (count + 2) / 2;
  size_t total_words = n_bytes / sizeof(capnp::word);
  if (table_words > total_words)
    return fail("segment table of " + std::to_string(count) + " entries is truncated");
  uint64_t payload = 0;
  for (uint64_t i = 0; i < count; ++i)
    payload += read_u32(p + 4 + 4 * i);
  if (payload != total_words - table_words)
    return fail("segment table says " + std::to_string(payload) + " words, buffer holds " +
                std::to_string(total_words - table_words));
  std::unique_ptr<frame> f(new frame());
  auto* words = buf.words() + table_words;
  for (uint64_t i = 0; i < count; ++i) {
    size_t sz = read_u32(p + 4 + 4 * i);
    f->segments_.emplace_back(words, sz);
    words += sz;
  }
  if (f->segments_.empty() || f->segments_[0].size() == 0)
    return fail("first segment is empty (no root pointer)");
  f->buffers_.push_back(std::move(buf));
  return frame_ptr(std::move(f));
}

caf::expected<frame_ptr> frame::parse_copy(const void* data, size_t n_bytes, buffer_pool& pool) {
  if (n_bytes > max_frame_bytes)
    return make_error(errc::limit_exceeded, "capnp frame of " + std::to_string(n_bytes) +
                                              " bytes exceeds the limit of " +
                                              std::to_string(max_frame_bytes));
  auto buf = pool.acquire((n_bytes + sizeof(capnp::word) - 1) / sizeof(capnp::word));
  if (n_bytes > 0)
    std::memcpy(buf.bytes(), data, n_bytes);
  return parse(std::move(buf), n_bytes);
}

frame_builder::frame_builder(size_t size_hint_words, std::shared_ptr<buffer_pool> pool)
  : builder_(std::make_unique<pooled_message_builder>(size_hint_words, pool)), pool_(std::move(pool)) {}

frame_builder::~frame_builder() = default;

capnp::MessageBuilder& frame_builder::message() {
  return *builder_;
}

capnp::Orphan<capnp::Data> frame_builder::adopt_data(pooled_buffer buf, size_t n_bytes) {
  if (n_bytes > buf.size_bytes())
    throw std::invalid_argument("frame_builder::adopt_data: " + std::to_string(n_bytes) +
                                " bytes exceed the buffer's " + std::to_string(buf.size_bytes()));
  // The data becomes a segment of whole words: zero the padding after it so
  // no stale bytes travel.
  size_t padded = (n_bytes + sizeof(capnp::word) - 1) / sizeof(capnp::word) * sizeof(capnp::word);
  std::memset(buf.bytes() + n_bytes, 0, padded - n_bytes);
  auto orphan = builder_->getOrphanage().referenceExternalData(capnp::Data::Reader(buf.bytes(), n_bytes));
  adopted_.push_back(std::move(buf));
  return orphan;
}

capnp::Orphan<capnp::Data> frame_builder::reference_data(const unsigned char* bytes, size_t n_bytes) {
  return builder_->getOrphanage().referenceExternalData(capnp::Data::Reader(bytes, n_bytes));
}

capnp::Orphan<capnp::Data> frame_builder::copy_data(const void* bytes, size_t n_bytes) {
  auto buf = pool_->acquire((n_bytes + sizeof(capnp::word) - 1) / sizeof(capnp::word));
  if (n_bytes > 0)
    std::memcpy(buf.bytes(), bytes, n_bytes);
  return adopt_data(std::move(buf), n_bytes);
}

capnp::Orphan<capnp::Data> frame_builder::copy_floats(const float* values, size_t n, bool* finite) {
  const size_t n_bytes = n * sizeof(float);
  auto buf = pool_->acquire((n_bytes + sizeof(capnp::word) - 1) / sizeof(capnp::word));
  *finite = copy_all_finite(buf.bytes(), values, n);
  if (*finite && n > 0)
    finite_.push_back({buf.bytes(), n_bytes});
  return adopt_data(std::move(buf), n_bytes);
}

bool frame::known_finite(const void* p, size_t n_bytes) const {
  const auto b = reinterpret_cast<uintptr_t>(p);
  for (auto& r : finite_) {
    const auto rb = reinterpret_cast<uintptr_t>(r.begin);
    if (b >= rb && n_bytes <= r.size && b - rb <= r.size - n_bytes)
      return true;
  }
  return false;
}

frame_ptr frame_builder::finish() {
  std::unique_ptr<frame> f(new frame());
  f->finite_ = std::move(finite_);
  f->buffers_ = std::move(adopted_);
  for (auto& s : builder_->getSegmentsForOutput())
    f->segments_.emplace_back(s);
  f->builder_ = std::move(builder_);
  return frame_ptr(std::move(f));
}

}  // namespace keel
