#pragma once
// Floating-point values as CAF message fields: wrap a float, a double or a
// vector of floats with wire::bits / wire::float_vector_bits inside an
// inspect() and it crosses processes as its IEEE bit pattern. CAF 0.17's
// serializer packs float and double with its own routine
// (caf/detail/ieee_754.hpp) that turns NaN into a finite number and never
// returns for +-infinity (it halves infinity until it drops below 2), so a
// bad value would be laundered or would hang the sending node. No CAF
// header is needed here: the inspectors are templates.

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace keel {

namespace wire {

// Floats cross as their IEEE bit patterns. CAF 0.17's serializer packs
// float and double with its own routine (caf/detail/ieee_754.hpp) that
// turns NaN into a finite number and never returns for +-infinity (it halves
// infinity until it drops below 2), so a bad value would be laundered or
// would hang the sending node.
template <class Float, class Bits>
struct ieee_bits {
  Float& value;
};

inline ieee_bits<float, uint32_t> bits(float& x) { return {x}; }
inline ieee_bits<double, uint64_t> bits(double& x) { return {x}; }

template <class I, class F, class B>
typename I::result_type inspect(I& f, ieee_bits<F, B>& x) {
  if constexpr (std::is_same<typename I::result_type, void>::value) {
    return f(x.value);
  } else {
    B b;
    std::memcpy(&b, &x.value, sizeof b);
    auto err = f(b);
    if constexpr (!I::reads_state)
      std::memcpy(&x.value, &b, sizeof b);
    return err;
  }
}

struct float_vector_bits {
  std::vector<float>& values;
};

template <class I>
typename I::result_type inspect(I& f, float_vector_bits& x) {
  if constexpr (std::is_same<typename I::result_type, void>::value) {
    return f(x.values);
  } else {
    std::vector<uint32_t> b(x.values.size());
    if (!b.empty())
      std::memcpy(b.data(), x.values.data(), b.size() * 4);
    auto err = f(b);
    if constexpr (!I::reads_state) {
      x.values.resize(b.size());
      if (!b.empty())
        std::memcpy(x.values.data(), b.data(), b.size() * 4);
    }
    return err;
  }
}

}  // namespace wire

}  // namespace keel
