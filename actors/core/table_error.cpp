#include "actors/core/table_error.hpp"

namespace keel {

const char* to_string(table_errc code) {
  switch (code) {
    case table_errc::ok:
      return "ok";
    case table_errc::invalid_config:
      return "invalid_config";
    case table_errc::block_shape:
      return "block_shape";
    case table_errc::name_mismatch:
      return "name_mismatch";
    case table_errc::dim_mismatch:
      return "dim_mismatch";
    case table_errc::dtype_mismatch:
      return "dtype_mismatch";
    case table_errc::optimizer_mismatch:
      return "optimizer_mismatch";
    case table_errc::options_mismatch:
      return "options_mismatch";
    case table_errc::slots_mismatch:
      return "slots_mismatch";
    case table_errc::key_outside_slots:
      return "key_outside_slots";
    case table_errc::non_finite:
      return "non_finite";
    case table_errc::duplicate_key:
      return "duplicate_key";
    case table_errc::malformed:
      return "malformed";
    case table_errc::count_mismatch:
      return "count_mismatch";
    case table_errc::crc_mismatch:
      return "crc_mismatch";
  }
  return "unknown";
}

bool is_damage(table_errc code) {
  return code == table_errc::malformed || code == table_errc::count_mismatch ||
         code == table_errc::crc_mismatch;
}

std::string describe(const table_error& e) {
  if (!e)
    return "ok";
  return std::string(to_string(e.code)) + ": " + e.what;
}

}  // namespace keel
