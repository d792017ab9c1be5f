#pragma once
// A buffer_pool hands out word-aligned buffers and takes them back when their
// owner lets go, so the hot path reuses memory that is already mapped: page
// faults cost 12-17 us per 4 KiB page on our machines (CAF017.md). Buffers
// come in power-of-two size classes from 512 words (4 KiB); the pool keeps at
// most `max_cached_bytes` (and `max_cached_buffers`) of idle buffers and
// frees the rest; over the count, the largest buffers are the ones kept.
// Thread-safe; a buffer may outlive the pool that made it (it is then freed,
// not returned).

#include <cstddef>
#include <cstdint>
#include <memory>

#include <capnp/common.h>

namespace keel {

class buffer_pool;

// Exclusive ownership of one pooled buffer; move-only. Its contents are
// unspecified when acquired (see `zero()`).
class pooled_buffer {
 public:
  pooled_buffer() = default;
  pooled_buffer(pooled_buffer&&) noexcept;
  pooled_buffer& operator=(pooled_buffer&&) noexcept;
  pooled_buffer(const pooled_buffer&) = delete;
  pooled_buffer& operator=(const pooled_buffer&) = delete;
  ~pooled_buffer();

  capnp::word* words() const { return words_; }
  unsigned char* bytes() const { return reinterpret_cast<unsigned char*>(words_); }
  size_t size_words() const { return size_words_; }
  size_t size_bytes() const { return size_words_ * sizeof(capnp::word); }
  explicit operator bool() const { return words_ != nullptr; }

  // Sets the first `n_words` words to zero (capnp builders need zeroed memory).
  void zero(size_t n_words);

 private:
  friend class buffer_pool;
  pooled_buffer(capnp::word* w, size_t n, std::weak_ptr<buffer_pool> pool)
    : words_(w), size_words_(n), pool_(std::move(pool)) {}
  void release();

  capnp::word* words_ = nullptr;
  size_t size_words_ = 0;
  std::weak_ptr<buffer_pool> pool_;
};

struct buffer_pool_stats {
  uint64_t acquired = 0;    // buffers handed out
  uint64_t reused = 0;      // of those, taken from the idle cache
  uint64_t cached_bytes = 0;
};

class buffer_pool : public std::enable_shared_from_this<buffer_pool> {
 public:
  static constexpr size_t default_max_cached_bytes = size_t{512} << 20;

  // Use `create`: the pool must be owned by a shared_ptr so buffers can find
  // it. A pool for a few large buffers of a growing size (one shard's
  // snapshots) keeps a count: a buffer given back to a pool holding
  // `max_cached_buffers` idle ones displaces the smallest of them, or is
  // freed if it is the smallest, so buffers a size class has outgrown go.
  static std::shared_ptr<buffer_pool> create(size_t max_cached_bytes = default_max_cached_bytes,
                                             size_t max_cached_buffers = SIZE_MAX);

  // The pool that frames decoded from the network use; one per process, like
  // an allocator.
  static const std::shared_ptr<buffer_pool>& process_default();

  // Returns a buffer of at least `min_words` words. Throws std::bad_alloc only
  // when the system is out of memory.
  pooled_buffer acquire(size_t min_words);

  buffer_pool_stats stats() const;

  ~buffer_pool();
  buffer_pool(const buffer_pool&) = delete;
  buffer_pool& operator=(const buffer_pool&) = delete;

 private:
  struct impl;
  buffer_pool(size_t max_cached_bytes, size_t max_cached_buffers);
  friend class pooled_buffer;
  void give_back(capnp::word* w, size_t n_words);
  std::unique_ptr<impl> impl_;
};

}  // namespace keel
