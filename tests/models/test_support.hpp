#pragma once
// Test support for the models tests: a temporary folder removed at scope
// exit, writers for small synthetic IDX files (valid or deliberately
// damaged) so loader and gradient tests run without the real MNIST
// download, and error_text for assertion messages.

#include <unistd.h>

#include <caf/expected.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "messages/errors.hpp"
#include "models/counter_rng.hpp"
#include "models/mnist_data.hpp"

namespace keel::test {

// The error of `e` rendered, or "ok": safe to evaluate when `e` holds a value
// (doctest renders messages of passing assertions too, under -s).
template <class T>
std::string error_text(const caf::expected<T>& e) {
  return e ? std::string("ok") : describe(e.error());
}

class temp_dir {
 public:
  temp_dir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "keel-models-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
      throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void put_u32(std::string& out, uint32_t v) {
  out += static_cast<char>(v >> 24);
  out += static_cast<char>(v >> 16);
  out += static_cast<char>(v >> 8);
  out += static_cast<char>(v);
}

inline void write_file(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// An IDX image file of `count` 28x28 images; pixels are a pure function of
// (seed, image, pixel), about a fifth of them ink as in MNIST.
inline std::string idx_images_bytes(uint32_t count, uint64_t seed, uint32_t magic = 0x00000803) {
  std::string out;
  put_u32(out, magic);
  put_u32(out, count);
  put_u32(out, 28);
  put_u32(out, 28);
  for (uint32_t i = 0; i < count; ++i)
    for (uint32_t p = 0; p < 784; ++p) {
      const uint64_t h = counter_hash(seed, i, p);
      out += static_cast<char>(h % 5 == 0 ? 1 + (h >> 8) % 255 : 0);
    }
  return out;
}

// An IDX label file; label i is a pure function of (seed, i), in 0..9.
inline std::string idx_labels_bytes(uint32_t count, uint64_t seed, uint32_t magic = 0x00000801) {
  std::string out;
  put_u32(out, magic);
  put_u32(out, count);
  for (uint32_t i = 0; i < count; ++i) out += static_cast<char>(counter_hash(seed, 77, i) % 10);
  return out;
}

// Writes a complete synthetic data set (four files) into `dir`.
inline void write_synthetic_mnist(const std::filesystem::path& dir, uint32_t train, uint32_t test) {
  std::filesystem::create_directories(dir);
  write_file(dir / mnist_train_images, idx_images_bytes(train, 1));
  write_file(dir / mnist_train_labels, idx_labels_bytes(train, 1));
  write_file(dir / mnist_test_images, idx_images_bytes(test, 2));
  write_file(dir / mnist_test_labels, idx_labels_bytes(test, 2));
}

}  // namespace keel::test
