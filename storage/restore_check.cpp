#include "storage/restore_check.hpp"

#include <map>
#include <set>

#include "messages/errors.hpp"
#include "storage/snapshot.hpp"

namespace keel {

namespace {

std::string describe_tensor(const std::vector<uint64_t>& shape, schema::DType dtype) {
  return shape_text(shape) + " " + dtype_name(dtype);
}

}  // namespace

caf::error check_restore(schema::ShardSnapshot::Reader snapshot,
                         const std::vector<tensor_spec>& expected, restore_rules rules) {
  std::map<std::string, schema::Tensor::Reader> stored;
  for (auto t : snapshot.getTensors())
    stored.emplace(t.getName().cStr(), t);
  std::set<std::string> wanted;
  for (auto& spec : expected) {
    wanted.insert(spec.name);
    auto it = stored.find(spec.name);
    if (it == stored.end())
      return make_error(errc::not_found, "tensor '" + spec.name + "': expected " +
                                           describe_tensor(spec.shape, spec.dtype) +
                                           ", but the snapshot of shard " +
                                           std::to_string(snapshot.getShard()) + " has no such tensor");
    auto shape = shape_of(it->second);
    auto dtype = it->second.getDtype();
    if (shape != spec.shape || dtype != spec.dtype)
      return make_error(errc::shape_mismatch, "tensor '" + spec.name + "': the snapshot has " +
                                                describe_tensor(shape, dtype) + ", expected " +
                                                describe_tensor(spec.shape, spec.dtype));
  }
  if (!rules.allow_extra_tensors)
    for (auto& [name, t] : stored)
      if (wanted.count(name) == 0)
        return make_error(errc::shape_mismatch,
                          "tensor '" + name + "': the snapshot has " +
                            describe_tensor(shape_of(t), t.getDtype()) +
                            ", which the restoring party does not expect");
  return {};
}

}  // namespace keel
