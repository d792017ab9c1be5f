// The size of a model as its shards reported it: reads the newest valid
// checkpoint of a keel run's checkpoint directory (every CRC checked) and
// counts, shard by shard, what the shards' snapshots hold: dense values and
// their optimizer slots (the "dense" and "dense.slotN" tensors), sparse
// entries (counted as values, their slots included), and for each embedding table (the "table.<name>" tensors) its
// rows, d and optimizer state slots from the table snapshot's header
// (actors/core/table_snapshot.hpp, format version 1; another version is
// refused by name, not guessed at). Parameters are rows x d values plus
// rows x d x slots optimizer state, float32 each; the model's bytes are
// 4 bytes a parameter (what the values and state weigh, no index or key).
// A checkpoint taken at a run's last step holds its final model.
// Usage: checkpoint_model_size DIR
// Prints one line per shard and a total line, each:
//   shard N rows R parameters P values V state S bytes B snapshot_bytes F
// and exits 1 with a message when the directory has no valid checkpoint or
// a table's header is not one this program reads.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "messages/errors.hpp"
#include "storage/snapshot.hpp"
#include "storage/snapshot_store.hpp"

using namespace keel;

namespace {

struct model_count {
  uint64_t rows = 0;
  uint64_t values = 0;  // float32 parameters
  uint64_t state = 0;   // float32 optimizer state
  uint64_t snapshot_bytes = 0;
  void operator+=(const model_count& o) {
    rows += o.rows;
    values += o.values;
    state += o.state;
    snapshot_bytes += o.snapshot_bytes;
  }
};

template <class T>
T read_le(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // the format is little-endian, as is this machine (x86-64)
  return v;
}

// Adds table tensor `t`'s rows, values and state to `c`; an error text if
// its header is not a version 1 table snapshot.
std::string count_table(schema::Tensor::Reader t, model_count& c) {
  constexpr uint64_t magic = 0x4b45454c5441424cULL;  // "KEELTABL"
  unsigned char h[88];
  auto chunks = t.getChunks();
  if (chunks.size() == 0 || chunks[0].size() < sizeof h)
    return "tensor '" + std::string(t.getName().cStr()) + "': shorter than a table header";
  std::memcpy(h, chunks[0].begin(), sizeof h);
  if (read_le<uint64_t>(h) != magic || read_le<uint16_t>(h + 8) != 1)
    return "tensor '" + std::string(t.getName().cStr()) +
           "': not a version 1 table snapshot (this program reads version 1 headers only)";
  const uint64_t dim = read_le<uint32_t>(h + 12);
  const uint64_t slots = read_le<uint32_t>(h + 16);
  const uint64_t rows = read_le<uint64_t>(h + 24);
  c.rows += rows;
  c.values += rows * dim;
  c.state += rows * dim * slots;
  return {};
}

// Elements of a float32 tensor.
uint64_t floats(schema::Tensor::Reader t) {
  return tensor_bytes(t) / 4;
}

void print(const char* label, const model_count& c) {
  const uint64_t params = c.values + c.state;
  std::printf("%s rows %llu parameters %llu values %llu state %llu bytes %llu snapshot_bytes %llu\n", label,
              static_cast<unsigned long long>(c.rows), static_cast<unsigned long long>(params),
              static_cast<unsigned long long>(c.values), static_cast<unsigned long long>(c.state),
              static_cast<unsigned long long>(params * 4), static_cast<unsigned long long>(c.snapshot_bytes));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: checkpoint_model_size DIR (a keel run's checkpoint directory)\n");
    return 2;
  }
  auto store = snapshot_store::open(argv[1]);
  if (!store) {
    std::fprintf(stderr, "checkpoint_model_size: %s\n", describe(store.error()).c_str());
    return 1;
  }
  auto latest = (*store)->latest_valid();
  if (!latest) {
    std::fprintf(stderr, "checkpoint_model_size: %s\n", describe(latest.error()).c_str());
    return 1;
  }
  auto& ck = latest->checkpoint;
  std::printf("checkpoint %llu step %llu shards %zu\n", static_cast<unsigned long long>(ck.manifest.checkpoint),
              static_cast<unsigned long long>(ck.manifest.step), ck.snapshots.size());
  model_count total;
  for (size_t i = 0; i < ck.snapshots.size(); ++i) {
    model_count c;
    auto snap = ck.snapshots[i].root();
    for (auto t : snap.getTensors()) {
      std::string name = t.getName().cStr();
      c.snapshot_bytes += tensor_bytes(t);
      if (name.rfind("table.", 0) == 0) {
        if (auto err = count_table(t, c); !err.empty()) {
          std::fprintf(stderr, "checkpoint_model_size: shard %zu: %s\n", i, err.c_str());
          return 1;
        }
      } else if (name == "dense" || name == "sparse.entries") {
        c.values += floats(t);
      } else if (name.rfind("dense.slot", 0) == 0) {
        c.state += floats(t);
      }
    }
    print(("shard " + std::to_string(snap.getShard())).c_str(), c);
    total += c;
  }
  print("total", total);
  return 0;
}
