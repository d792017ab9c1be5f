#pragma once
// The errors of keel's embedding-table store (actors/core/hash_slots.hpp,
// embedding_table.hpp, table_snapshot.hpp) as plain values, without CAF: a
// code naming what kind of input was wrong and one human-readable sentence
// naming the table, the key or the field. The store never throws for bad
// input and never applies part of a refused request. Where a table error
// crosses into the actors it becomes a keel caf::error (messages/errors.hpp):
// a refused push or pull as errc::invalid_field, a snapshot that does not fit
// the shard as errc::shape_mismatch, a damaged one as errc::damaged_snapshot
// (is_damage below says which).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace keel {

enum class table_errc : uint8_t {
  ok = 0,
  invalid_config,      // a table or slot map that cannot exist (d = 0, no slots, ...)
  block_shape,         // a push's gradient block or a pull's output is not n x d
  name_mismatch,       // a request or snapshot for another table
  dim_mismatch,        // another row dimension d
  dtype_mismatch,      // another element type (only float32 exists)
  optimizer_mismatch,  // another optimizer kind, so another state layout
  options_mismatch,    // another capacity, eviction or admission setting
  slots_mismatch,      // another slot count, or another set of owned slots
  key_outside_slots,   // a key whose slot this table does not own
  non_finite,          // NaN or Inf in a gradient block (or a stored row)
  duplicate_key,       // a key twice in one push (or in one snapshot)
  malformed,           // bytes that are not a table snapshot (magic, version, lengths)
  count_mismatch,      // a snapshot's counts disagree with its length or with each other
  crc_mismatch,        // a snapshot's CRC32C does not match its bytes
};

// The code's name, e.g. "duplicate_key".
const char* to_string(table_errc code);

// True for the codes that mean damaged bytes (malformed, count_mismatch,
// crc_mismatch) rather than a well-formed snapshot of another shape.
bool is_damage(table_errc code);

// An error value: `code` is ok when there is no error.
struct table_error {
  table_errc code = table_errc::ok;
  std::string what;  // "table 'users': key 42 twice in one push (rows 3 and 7)"

  table_error() = default;
  table_error(table_errc c, std::string w) : code(c), what(std::move(w)) {}
  // True when there IS an error (as caf::error does).
  explicit operator bool() const { return code != table_errc::ok; }
};

// "duplicate_key: table 'users': ...", or "ok".
std::string describe(const table_error& e);

// A value or the error that prevented it (a minimal expected<T>).
template <class T>
class table_result {
 public:
  table_result(T value) : value_(std::move(value)) {}
  table_result(table_error e) : error_(std::move(e)) {}
  bool has_value() const { return value_.has_value(); }
  explicit operator bool() const { return has_value(); }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  const table_error& error() const { return error_; }

 private:
  std::optional<T> value_;
  table_error error_;
};

}  // namespace keel
