#include "models/parameter_layout.hpp"

#include "messages/errors.hpp"

namespace keel {

parameter_layout& parameter_layout::add_dense(std::string name, std::vector<uint64_t> shape) {
  uint64_t size = 1;
  for (uint64_t d : shape) size *= d;
  dense_.push_back(tensor_spec{std::move(name), std::move(shape), dense_size_, size});
  dense_size_ += size;
  return *this;
}

parameter_layout& parameter_layout::set_sparse(std::string name, uint64_t key_count) {
  sparse_name_ = std::move(name);
  sparse_key_count_ = key_count;
  return *this;
}

parameter_layout& parameter_layout::add_table(std::string name, uint32_t dim) {
  tables_.push_back(table_spec{std::move(name), dim});
  return *this;
}

caf::expected<uint32_t> parameter_layout::find_table(const std::string& name) const {
  for (size_t t = 0; t < tables_.size(); ++t)
    if (tables_[t].name == name)
      return static_cast<uint32_t>(t);
  return make_error(errc::not_found, "no embedding table named \"" + name + "\" in the layout");
}

caf::expected<tensor_spec> parameter_layout::find(const std::string& name) const {
  for (const auto& t : dense_)
    if (t.name == name)
      return t;
  return make_error(errc::not_found, "no dense tensor named \"" + name + "\" in the layout");
}

std::string parameter_layout::describe() const {
  std::string out;
  for (const auto& t : dense_) {
    out += t.name + " [";
    for (size_t i = 0; i < t.shape.size(); ++i) out += (i ? ", " : "") + std::to_string(t.shape[i]);
    out += t.size == 0 ? "] no keys\n"
                       : "] keys " + std::to_string(t.first_key) + ".." +
                             std::to_string(t.first_key + t.size - 1) + "\n";
  }
  if (sparse_key_count_ > 0)
    out += sparse_name_ + " sparse keys 0.." + std::to_string(sparse_key_count_ - 1) + "\n";
  for (const auto& t : tables_)
    out += t.name + " table rows of " + std::to_string(t.dim) + ", any uint64 key\n";
  return out;
}

}  // namespace keel
