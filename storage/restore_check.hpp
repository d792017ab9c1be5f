#pragma once
// Restore validation: before a party (a parameter shard, a worker) loads a
// snapshot into its state, it states what it expects, tensor by tensor, and
// `check_restore` compares. A mismatch is refused with an error that names
// the tensor and both sides ("tensor 'layer1.w': the snapshot has shape
// [784, 128] float32, expected [784, 256] float32"), so a model changed
// between runs is caught at load time, not as garbage later. Pure function.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "messages/protocol.capnp.h"

namespace keel {

// One tensor the restoring party expects to find.
struct tensor_spec {
  std::string name;
  schema::DType dtype = schema::DType::FLOAT32;
  std::vector<uint64_t> shape;
};

struct restore_rules {
  // When false, tensors in the snapshot that no spec names are refused too.
  bool allow_extra_tensors = false;
};

// Checks every spec against the snapshot's tensors. Returns the first
// problem: errc::not_found for a tensor the snapshot lacks, errc::shape_mismatch
// for a different shape or dtype (naming both) or, unless allowed, for a
// tensor nobody expects. Returns an empty error when everything matches.
caf::error check_restore(schema::ShardSnapshot::Reader snapshot,
                         const std::vector<tensor_spec>& expected, restore_rules rules = {});

}  // namespace keel
