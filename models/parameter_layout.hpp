#pragma once
// A parameter_layout names a model's parameters and maps them to keys. Dense
// tensors (each with a name and a row-major shape) are laid end to end in one
// flat float32 key space [0, dense_size()), in the order they were added; a
// sparse model also has one separate sparse key space [0, sparse_key_count())
// whose keys are pulled and pushed individually; and a model may declare
// embedding tables, each a name and a row dimension d, whose keys are any
// 64-bit value (hashed feature IDs) and whose rows (d float32 each) exist
// from their first touch on (model::initial_rows). Table t of tables() is
// "table t" everywhere the model interface takes a table index. A layout is
// an immutable value once built; sharing it between threads is safe.

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

// One embedding table: rows of `dim` floats keyed by any uint64.
struct table_spec {
  std::string name;
  uint32_t dim = 0;
};

class parameter_layout {
 public:
  // Appends a dense tensor after the existing ones. Names must be unique and
  // every dimension positive (a model's own construction; checked by find()).
  parameter_layout& add_dense(std::string name, std::vector<uint64_t> shape);

  // Declares the sparse key space: `key_count` keys named `name`.
  parameter_layout& set_sparse(std::string name, uint64_t key_count);

  // Appends an embedding table of rows of `dim` floats (positive); names must
  // be unique among tables (a model's own construction).
  parameter_layout& add_table(std::string name, uint32_t dim);

  const std::vector<tensor_spec>& dense() const noexcept { return dense_; }
  const std::vector<table_spec>& tables() const noexcept { return tables_; }
  uint64_t dense_size() const noexcept { return dense_size_; }
  const std::string& sparse_name() const noexcept { return sparse_name_; }
  uint64_t sparse_key_count() const noexcept { return sparse_key_count_; }

  // The dense tensor called `name`, or not_found naming it.
  caf::expected<tensor_spec> find(const std::string& name) const;

  // The index of the table called `name`, or not_found naming it.
  caf::expected<uint32_t> find_table(const std::string& name) const;

  // One line per tensor, e.g. "fc1.weight [784, 128] keys 0..100351", then
  // one per table, e.g. "ctr_fm.c1 table rows of 17, any uint64 key".
  std::string describe() const;

 private:
  std::vector<tensor_spec> dense_;
  std::vector<table_spec> tables_;
  uint64_t dense_size_ = 0;
  std::string sparse_name_;
  uint64_t sparse_key_count_ = 0;
};

}  // namespace keel
