#pragma once
// A span<T> is a non-owning view of `size()` contiguous elements of T, the
// C++17 stand-in for std::span that the model interface passes buffers with.
// It never allocates or frees; the viewed memory must outlive it. Copying a
// span copies the view, not the elements.

#include <cstddef>
#include <type_traits>
#include <vector>

namespace keel {

template <class T>
class span {
 public:
  constexpr span() noexcept = default;
  constexpr span(T* data, std::size_t size) noexcept : data_(data), size_(size) {}

  // Views a whole vector (const vectors give spans of const elements).
  template <class U, class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
  span(std::vector<U>& v) noexcept : data_(v.data()), size_(v.size()) {}
  template <class U, class = std::enable_if_t<std::is_convertible_v<const U (*)[], T (*)[]>>>
  span(const std::vector<U>& v) noexcept : data_(v.data()), size_(v.size()) {}

  // A span<T> converts to a span<const T>.
  template <class U, class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
  constexpr span(span<U> other) noexcept : data_(other.data()), size_(other.size()) {}

  constexpr T* data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr T& operator[](std::size_t i) const noexcept { return data_[i]; }
  constexpr T* begin() const noexcept { return data_; }
  constexpr T* end() const noexcept { return data_ + size_; }

  // The `count` elements starting at `offset`; the caller keeps it in range.
  constexpr span subspan(std::size_t offset, std::size_t count) const noexcept {
    return span(data_ + offset, count);
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace keel
