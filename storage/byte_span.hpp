#pragma once
// A byte_span names `size` writable bytes at `data` that someone else owns:
// how a producer is handed memory to write into (e.g. the chunks of a
// snapshot tensor inside its message), so that it writes its bytes once,
// where they end up, instead of into a buffer that is copied afterwards.
//
// A span_source hands a producer its spans one at a time, in order. Asking
// for the next span means the one before is complete: a source may then
// write it elsewhere (a file) and hand the same memory out again, so a
// producer of any length can write through a buffer of one span's size.

#include <cstddef>
#include <vector>

namespace keel {

struct byte_span {
  unsigned char* data = nullptr;
  size_t size = 0;
};

// `size` readable bytes at `data` that someone else owns: one of the parts
// a consumer reads in order (e.g. the chunks of a snapshot tensor), so that
// it reads them where they are instead of from a gathered copy.
struct byte_view {
  const unsigned char* data = nullptr;
  size_t size = 0;
};

class span_source {
 public:
  virtual ~span_source() = default;
  // The next span; one of size 0 when there is none (the producer's bytes
  // exceed what the consumer expects).
  virtual byte_span next() = 0;
};

// The spans of a vector, in order: memory that holds all of them at once.
class span_list_source final : public span_source {
 public:
  explicit span_list_source(const std::vector<byte_span>& spans) : spans_(spans) {}
  byte_span next() override {
    while (i_ < spans_.size() && spans_[i_].size == 0) ++i_;  // an empty span holds nothing
    return i_ < spans_.size() ? spans_[i_++] : byte_span{};
  }

 private:
  const std::vector<byte_span>& spans_;
  size_t i_ = 0;
};

}  // namespace keel
