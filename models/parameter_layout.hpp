#pragma once
// A parameter_layout names a model's parameters and maps them to keys. Dense
// tensors (each with a name and a row-major shape) are laid end to end in one
// flat float32 key space [0, dense_size()), in the order they were added; a
// sparse model also has one separate sparse key space [0, sparse_key_count())
// whose keys are pulled and pushed individually. A layout is an immutable
// value once built; sharing it between threads is safe.

#include <caf/expected.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace keel {

// One dense tensor: its keys are [first_key, first_key + size).
struct tensor_spec {
  std::string name;
  std::vector<uint64_t> shape;  // row-major; size is the product
  uint64_t first_key = 0;
  uint64_t size = 0;
};

class parameter_layout {
 public:
  // Appends a dense tensor after the existing ones. Names must be unique and
  // every dimension positive (a model's own construction; checked by find()).
  parameter_layout& add_dense(std::string name, std::vector<uint64_t> shape);

  // Declares the sparse key space: `key_count` keys named `name`.
  parameter_layout& set_sparse(std::string name, uint64_t key_count);

  const std::vector<tensor_spec>& dense() const noexcept { return dense_; }
  uint64_t dense_size() const noexcept { return dense_size_; }
  const std::string& sparse_name() const noexcept { return sparse_name_; }
  uint64_t sparse_key_count() const noexcept { return sparse_key_count_; }

  // The dense tensor called `name`, or not_found naming it.
  caf::expected<tensor_spec> find(const std::string& name) const;

  // One line per tensor, e.g. "fc1.weight [784, 128] keys 0..100351".
  std::string describe() const;

 private:
  std::vector<tensor_spec> dense_;
  uint64_t dense_size_ = 0;
  std::string sparse_name_;
  uint64_t sparse_key_count_ = 0;
};

}  // namespace keel
