#pragma once
// A byte_span names `size` writable bytes at `data` that someone else owns:
// how a producer is handed memory to write into (e.g. the chunks of a
// snapshot tensor inside its message), so that it writes its bytes once,
// where they end up, instead of into a buffer that is copied afterwards.

#include <cstddef>

namespace keel {

struct byte_span {
  unsigned char* data = nullptr;
  size_t size = 0;
};

}  // namespace keel
