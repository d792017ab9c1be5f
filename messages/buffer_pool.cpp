#include "messages/buffer_pool.hpp"

#include <array>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

namespace keel {

namespace {

constexpr size_t min_class_words = 512;  // 4 KiB
constexpr size_t num_classes = 24;       // up to 512 * 2^23 words = 32 GiB

size_t class_index(size_t words) {
  size_t idx = 0;
  size_t cap = min_class_words;
  while (cap < words && idx + 1 < num_classes) {
    cap <<= 1;
    ++idx;
  }
  return idx;
}

size_t class_words(size_t idx) {
  return min_class_words << idx;
}

capnp::word* allocate_words(size_t n) {
  // operator new with alignment: capnp needs 8-byte alignment, 64 keeps
  // vectorised scans on whole cache lines.
  return static_cast<capnp::word*>(::operator new(n * sizeof(capnp::word), std::align_val_t{64}));
}

void free_words(capnp::word* w) {
  ::operator delete(w, std::align_val_t{64});
}

}  // namespace

struct buffer_pool::impl {
  impl(size_t max, size_t max_buffers) : max_cached_bytes(max), max_cached_buffers(max_buffers) {}
  mutable std::mutex mtx;
  size_t max_cached_bytes;
  size_t max_cached_buffers;
  size_t cached_buffers = 0;
  std::array<std::vector<capnp::word*>, num_classes> idle;
  buffer_pool_stats stats;

  // Frees the idle buffer of the smallest class below `idx`, if any, to make
  // room in the count for one of class `idx`; returns whether it did.
  bool drop_smaller_than(size_t idx) {
    for (size_t c = 0; c < idx; ++c) {
      if (idle[c].empty())
        continue;
      free_words(idle[c].back());
      idle[c].pop_back();
      --cached_buffers;
      stats.cached_bytes -= class_words(c) * sizeof(capnp::word);
      return true;
    }
    return false;
  }
};

pooled_buffer::pooled_buffer(pooled_buffer&& other) noexcept
  : words_(other.words_), size_words_(other.size_words_), pool_(std::move(other.pool_)) {
  other.words_ = nullptr;
  other.size_words_ = 0;
}

pooled_buffer& pooled_buffer::operator=(pooled_buffer&& other) noexcept {
  if (this != &other) {
    release();
    words_ = other.words_;
    size_words_ = other.size_words_;
    pool_ = std::move(other.pool_);
    other.words_ = nullptr;
    other.size_words_ = 0;
  }
  return *this;
}

pooled_buffer::~pooled_buffer() {
  release();
}

void pooled_buffer::zero(size_t n_words) {
  std::memset(words_, 0, (n_words < size_words_ ? n_words : size_words_) * sizeof(capnp::word));
}

void pooled_buffer::release() {
  if (words_ == nullptr)
    return;
  if (auto pool = pool_.lock())
    pool->give_back(words_, size_words_);
  else
    free_words(words_);
  words_ = nullptr;
  size_words_ = 0;
}

buffer_pool::buffer_pool(size_t max_cached_bytes, size_t max_cached_buffers)
  : impl_(std::make_unique<impl>(max_cached_bytes, max_cached_buffers)) {}

buffer_pool::~buffer_pool() {
  for (auto& cls : impl_->idle)
    for (auto* w : cls)
      free_words(w);
}

std::shared_ptr<buffer_pool> buffer_pool::create(size_t max_cached_bytes, size_t max_cached_buffers) {
  return std::shared_ptr<buffer_pool>(new buffer_pool(max_cached_bytes, max_cached_buffers));
}

const std::shared_ptr<buffer_pool>& buffer_pool::process_default() {
  static const std::shared_ptr<buffer_pool> pool = create();
  return pool;
}

pooled_buffer buffer_pool::acquire(size_t min_words) {
  auto idx = class_index(min_words);
  auto n = class_words(idx);
  if (n < min_words) {
    // Larger than the largest class: exact allocation, never cached.
    return pooled_buffer(allocate_words(min_words), min_words, weak_from_this());
  }
  {
    std::lock_guard<std::mutex> guard(impl_->mtx);
    ++impl_->stats.acquired;
    auto& cls = impl_->idle[idx];
    if (!cls.empty()) {
      auto* w = cls.back();
      cls.pop_back();
      ++impl_->stats.reused;
      --impl_->cached_buffers;
      impl_->stats.cached_bytes -= n * sizeof(capnp::word);
      return pooled_buffer(w, n, weak_from_this());
    }
  }
  return pooled_buffer(allocate_words(n), n, weak_from_this());
}

void buffer_pool::give_back(capnp::word* w, size_t n_words) {
  auto idx = class_index(n_words);
  if (class_words(idx) == n_words) {
    std::lock_guard<std::mutex> guard(impl_->mtx);
    auto bytes = n_words * sizeof(capnp::word);
    bool counted_in = impl_->cached_buffers < impl_->max_cached_buffers || impl_->drop_smaller_than(idx);
    if (counted_in && impl_->stats.cached_bytes + bytes <= impl_->max_cached_bytes) {
      impl_->idle[idx].push_back(w);
      ++impl_->cached_buffers;
      impl_->stats.cached_bytes += bytes;
      return;
    }
  }
  free_words(w);
}

buffer_pool_stats buffer_pool::stats() const {
  std::lock_guard<std::mutex> guard(impl_->mtx);
  return impl_->stats;
}

}  // namespace keel
