#pragma once
// The MNIST data set (or Fashion-MNIST, its drop-in replacement with the same
// layout) read from the four uncompressed IDX files that
// scripts/fetch-mnist.sh puts in a cache directory. Loading checks each
// file's magic number, dimensions, exact size and label range and reports the
// first problem as an error naming the file and how to fetch the data; it
// never returns partial data as good. A loaded mnist_dataset is immutable and
// safe to share between threads (models hold it by shared_ptr<const>).

#include <caf/expected.hpp>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "models/model_configs.hpp"

namespace keel {

// Which data set a directory holds: the handwritten digits or Fashion-MNIST.
enum class mnist_variant { digits, fashion };

// "mnist" or "fashion-mnist": also the name of the variant's cache folder.
const char* to_string(mnist_variant v);

// The contents of an IDX image file (magic 0x00000803): `count` images of
// rows x cols unsigned bytes, row-major, one after another.
struct idx_images {
  uint64_t count = 0;
  uint64_t rows = 0;
  uint64_t cols = 0;
  std::vector<uint8_t> pixels;
};

// Reads an IDX image file, keeping only its first `limit` images when limit > 0.
// Errors (each naming `file` and suggesting `bash scripts/fetch-mnist.sh`):
// not_found if it does not exist; invalid_field for a bad magic number or a
// zero dimension; io_error if it is shorter (truncated) or longer than its
// header says or cannot be read.
caf::expected<idx_images> read_idx_images(const std::filesystem::path& file, uint64_t limit = 0);

// Reads an IDX label file (magic 0x00000801), as read_idx_images does.
caf::expected<std::vector<uint8_t>> read_idx_labels(const std::filesystem::path& file,
                                                    uint64_t limit = 0);

// The file names of the four IDX files, as in the original distribution.
inline constexpr const char* mnist_train_images = "train-images-idx3-ubyte";
inline constexpr const char* mnist_train_labels = "train-labels-idx1-ubyte";
inline constexpr const char* mnist_test_images = "t10k-images-idx3-ubyte";
inline constexpr const char* mnist_test_labels = "t10k-labels-idx1-ubyte";

class mnist_dataset {
 public:
  static constexpr uint64_t image_side = 28;
  static constexpr uint64_t image_pixels = image_side * image_side;
  static constexpr int classes = 10;

  // One split: `count` images of image_pixels bytes and their labels (0..9).
  struct split {
    uint64_t count = 0;
    std::vector<uint8_t> pixels;
    std::vector<uint8_t> labels;
    const uint8_t* image(uint64_t i) const noexcept { return pixels.data() + i * image_pixels; }
  };

  // How much of each split to load (0 = all): tests use small prefixes.
  using limits = example_limits;

  // Loads the four IDX files in `dir`, which must be 28x28 images with labels
  // 0..9 and as many labels as images. Errors name the offending file.
  static caf::expected<std::shared_ptr<const mnist_dataset>> load(const std::filesystem::path& dir,
                                                                  mnist_variant variant,
                                                                  limits lim);

  // Loads from the cache layout scripts/fetch-mnist.sh writes: base/mnist if
  // that folder exists, else base/fashion-mnist if it exists, else not_found
  // naming base/mnist/train-images-idx3-ubyte and the fetch command.
  static caf::expected<std::shared_ptr<const mnist_dataset>> load_cached(
      const std::filesystem::path& base, limits lim);

  mnist_variant variant() const noexcept { return variant_; }
  const split& train() const noexcept { return train_; }
  const split& test() const noexcept { return test_; }

 private:
  mnist_variant variant_ = mnist_variant::digits;
  split train_;
  split test_;
};

}  // namespace keel
