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
  return out;
}

}  // namespace keel
