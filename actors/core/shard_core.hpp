#pragma once
// shard_core is the state and the rules of one parameter shard, without the
// actor around it: the parameters of a dense key range and of a sparse key
// range, their optimizer state, and for every worker the last push it
// received and applied. It applies every (worker, seq) at most once and in
// seq order, holds BSP pushes until their step is complete and then applies
// the step's gradients summed in worker-id order (so the result does not
// depend on arrival order), and decides when a pull may be served. It is a
// plain value: deterministic, single-threaded, movable; the
// parameter_shard actor owns one. Snapshots: actors/core/shard_snapshot.hpp.
//
// Embedding tables: a shard of a job whose model declares tables holds, for
// each table of the layout, an embedding_table (actors/core/embedding_table.hpp)
// of the rows whose hash slot the job's slot map (config.table_slot_owners)
// gives this shard; rows are created at their first push with the model's
// initial_rows, bound in as a table_row_source. A push's table blocks are one
// seq like its dense ranges: deduplicated, held and replayed the same way;
// under BSP a step's blocks are summed per key in worker order
// (sum_row_blocks) and applied once, at the shard's optimizer step.

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <unordered_map>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/error.hpp>

#include "actors/core/consistency.hpp"
#include "actors/core/embedding_table.hpp"
#include "actors/core/optimizer.hpp"
#include "actors/core/row_block_sum.hpp"
#include "actors/core/table_limits.hpp"
#include "actors/core/worker_schedule.hpp"
#include "actors/core/partition.hpp"
#include "messages/decode.hpp"
#include "models/parameter_layout.hpp"

namespace keel {

// Writes the initial row of `key` in table `table` (dim floats) to `out`: the
// model's initial_rows bound to the job's seed. Pure; must not throw.
using table_row_source = std::function<void(uint32_t table, uint64_t key, float* out, uint32_t dim)>;

// The field order is the wire format.
template <class I>
typename I::result_type inspect(I& f, table_spec& x) {
  return f(caf::meta::type_name("keel.table_spec"), x.name, x.dim);
}

// Dense keys with a rule of their own (training_config::rules): `keys`, a
// part of the shard's dense range, updated by `rule` instead of the
// shard's optimizer.
struct rule_span {
  key_range keys;
  optimizer_config rule;
};

template <class I>
typename I::result_type inspect(I& f, rule_span& x) {
  return f(caf::meta::type_name("keel.rule_span"), x.keys, x.rule);
}

struct shard_config {
  uint32_t shard = 0;
  uint32_t num_workers = 1;
  key_range dense;   // dense keys this shard owns
  key_range sparse;  // sparse keys this shard owns (values start at 0)
  consistency rule;
  optimizer_config optimizer;
  std::vector<table_spec> tables;           // the layout's tables; table t is tables[t]
  std::vector<uint32_t> table_slot_owners;  // the slot map: the shard of each hash slot (empty without tables)
  table_limits limits;                      // of every table
  // Which of the num_workers workers take part in which steps (elastic
  // workers): a BSP step waits for and sums the pushes of that step's
  // workers, SSP's slowest is the slowest of those taking part, and a push
  // outside its worker's span is refused. Without changes, every worker
  // takes part throughout.
  worker_schedule workers{1};
  // Per-parameter rules (training_config::rules): dense keys updated by a
  // rule of their own (ascending, disjoint, inside `dense`; the rest by
  // `optimizer`), and each table's rule (one per table, or none: every
  // table by `optimizer`). The dense slot arrays hold the most slots any
  // of the dense rules keeps (dense_slots), each key's slots starting at
  // its own rule's initial values.
  std::vector<rule_span> dense_rules;
  std::vector<optimizer_config> table_rules;
};

// The field order is the wire format (a remote shard's spawn carries it).
template <class I>
typename I::result_type inspect(I& f, shard_config& x) {
  return f(caf::meta::type_name("keel.shard_config"), x.shard, x.num_workers, x.dense, x.sparse, x.rule,
           x.optimizer, x.tables, x.table_slot_owners, x.limits, x.workers, x.dense_rules, x.table_rules);
}

// The slot arrays the shard's dense keys need: the most state slots any
// rule of its dense keys keeps (0, 1 or 2).
size_t dense_slots(const shard_config& cfg);

// Fresh slot arrays of the shard's dense keys (dense_slots of them; the
// others left empty), each key's slots at its own rule's initial values.
void initial_dense_slots(const shard_config& cfg, std::vector<float>& slot1, std::vector<float>& slot2);

// Calls f(rule, begin, n) for each run of the dense keys [begin, begin + n)
// (inside the shard's range) that one rule updates, in key order.
template <class F>
void for_each_rule_run(const shard_config& cfg, uint64_t begin, uint64_t n, F f) {
  const uint64_t end = begin + n;
  uint64_t at = begin;
  for (auto& r : cfg.dense_rules) {
    if (r.keys.end <= at)
      continue;
    if (r.keys.begin >= end)
      break;
    if (r.keys.begin > at)
      f(cfg.optimizer, at, r.keys.begin - at);
    const uint64_t stop = std::min(end, r.keys.end);
    const uint64_t from = std::max(at, r.keys.begin);
    f(r.rule, from, stop - from);
    at = stop;
  }
  if (at < end)
    f(cfg.optimizer, at, end - at);
}

// Checks the per-parameter rules against the shard: spans ascending,
// disjoint, inside its range, one rule per table (or none), every custom
// rule present in this process with at most 2 slots. Errors name the rule.
caf::error check_rules(const shard_config& cfg);

// The job's slot map for its tables: default_slot_count slots, shard s owning
// the s-th contiguous range (slot_map::contiguous), as each slot's owner.
// Shards (their config) and workers (worker_core) both use it.
std::vector<uint32_t> default_slot_owners(uint32_t shards);

// The slots of `shard` in a slot map given as each slot's owner.
slot_set owned_slots(const std::vector<uint32_t>& slot_owners, uint32_t shard);

// The embedding_table configuration of table `t` on the shard `cfg` describes.
table_config shard_table_config(const shard_config& cfg, uint32_t t);

// What became of an offered push; `status` is what the ack says.
struct push_outcome {
  schema::PushAck::Status status = schema::PushAck::Status::APPLIED;
  std::string reason;         // for rejected / outOfOrder
  uint64_t expected_seq = 0;  // for outOfOrder
  uint64_t steps_applied = 0; // BSP steps this offer completed (0 or more)
};

// A sparse parameter with its optimizer slots.
struct sparse_entry {
  float value = 0;
  float slot1 = 0;
  float slot2 = 0;
};

class shard_core {
 public:
  // A shard whose dense keys start at `initial_dense` (the values of
  // cfg.dense, in key order). Fails with invalid_argument, naming both
  // sizes, when their numbers differ, and with invalid_argument when the
  // config has tables but no slot map or `rows` is empty, or a table cannot
  // be made (naming it).
  static caf::expected<shard_core> make(shard_config cfg, std::vector<float> initial_dense,
                                        table_row_source rows = {});
  // An empty shard owning no keys (a placeholder to assign to).
  shard_core() = default;
  shard_core(const shard_core&) = default;
  shard_core(shard_core&&) = default;
  shard_core& operator=(const shard_core&) = default;
  shard_core& operator=(shard_core&&) = default;
  // Hands its large arrays to the tensor recycler (actors/core/tensor_recycler.hpp),
  // so the next incarnation restores into memory already faulted in.
  ~shard_core();

  // Offers a validated push. Duplicates (seq already received) are
  // acknowledged again and not applied; a seq that skips ahead is refused as
  // outOfOrder with the seq needed next; a push outside this shard's keys or
  // from an unknown worker is rejected. Under BSP an in-order push is held
  // (`accepted`) until every worker's push for its step is here.
  push_outcome offer(decoded<schema::Push> push);

  // True when a pull at `clock` may be answered under the consistency rule.
  bool can_serve(uint64_t clock) const;

  // Fills `reply` with the requested values. Fails, naming the key, when a
  // requested key is not this shard's. Given the reply's frame_builder, the
  // dense values go into buffers of their own (copy_floats: one pass over
  // them instead of a zero-fill and a copy, that also finds them finite, so
  // a worker in this process need not scan them again).
  caf::error read(schema::PullRequest::Reader req, schema::PullReply::Builder reply,
                  frame_builder* fb = nullptr) const;

  const shard_config& config() const { return cfg_; }
  // The job changed its workers at runtime (worker_schedule::changed): the
  // schedule from a step no worker has pushed yet on.
  void change_workers(const worker_schedule& workers);
  uint64_t version() const { return version_; }  // updates applied so far
  uint64_t bsp_clock() const { return bsp_clock_; }  // BSP steps complete
  // How far every worker has come: the BSP clock, or under SSP/ASP the
  // slowest worker's clock (every push below it is applied).
  uint64_t progress_clock() const;
  uint64_t optimizer_steps() const { return optimizer_steps_; }
  uint64_t applied(uint32_t worker) const { return applied_.at(worker); }
  uint64_t received(uint32_t worker) const { return received_.at(worker); }
  uint64_t worker_clock(uint32_t worker) const { return worker_clock_.at(worker); }
  const std::vector<float>& dense() const { return dense_; }
  const std::vector<float>& dense_slot(size_t i) const { return i == 0 ? slot1_ : slot2_; }
  // Unordered: a hash table keeps pulls and pushes O(1) per key over the
  // million-key sparse models; snapshots sort the keys they write.
  const std::unordered_map<uint64_t, sparse_entry>& sparse() const { return sparse_; }
  // The embedding tables, by layout table index (empty without tables).
  const std::vector<embedding_table>& tables() const { return tables_; }
  const table_row_source& row_source() const { return rows_; }

  // Changes since the last clear_changes() (or since the shard was made or
  // restored): what an incremental snapshot (actors/core/shard_delta.hpp)
  // writes. Dense parameters are tracked by chunks of dense_chunk_floats
  // keys (a bit each, with their optimizer state), tables by row
  // (embedding_table.hpp). The legacy sparse scalars are not tracked: a
  // delta carries them whole.
  static constexpr uint64_t dense_chunk_floats = uint64_t{1} << 16;
  bool dense_chunk_changed(uint64_t chunk) const {
    return chunk / 64 < dense_changed_.size() && ((dense_changed_[chunk >> 6] >> (chunk & 63)) & 1);
  }
  uint64_t dense_chunks() const { return (dense_.size() + dense_chunk_floats - 1) / dense_chunk_floats; }
  // Whether every table kept its changes (else only a full snapshot will do).
  bool changes_complete() const;
  // About the bytes a delta would take now (rows and values; no headers).
  uint64_t delta_bytes_estimate() const;
  // Marks everything unchanged: a snapshot of this state was taken.
  void clear_changes();

  // Replaces the whole state (used by restore; checked by the caller).
  struct state {
    std::vector<float> dense, slot1, slot2;
    std::unordered_map<uint64_t, sparse_entry> sparse;
    std::vector<embedding_table> tables;  // one per cfg.tables entry
    std::vector<uint64_t> applied, worker_clock;
    uint64_t version = 0, bsp_clock = 0, optimizer_steps = 0;
  };
  void assign(state s);
  // A shard holding `s` (restore). Fails with invalid_argument, naming both
  // sizes, unless s.dense has cfg.dense.size() values and s.tables one
  // table per cfg.tables entry.
  static caf::expected<shard_core> restored(shard_config cfg, state s, table_row_source rows = {});

 private:
  shard_core(shard_config cfg, std::vector<float> initial_dense);
  caf::error check_keys(schema::Push::Reader p) const;
  caf::error check_tables(schema::Push::Reader p) const;
  caf::error read_tables(schema::PullRequest::Reader req, schema::PullReply::Builder reply) const;
  void apply_tables_now(schema::Push::Reader p);
  void apply_tables_summed();
  void apply_now(schema::Push::Reader p);
  bool apply_dense_one_pass();
  void apply_dense_summed();
  void apply_sparse_summed();
  uint64_t apply_complete_steps();
  // Whether `worker` takes part in `step` (always, without elastic workers).
  bool takes_part(uint32_t worker, uint64_t step) const {
    return !cfg_.workers.elastic() || cfg_.workers.active(worker, step);
  }
  // The schedule's floor under a worker's seqs and clock: a worker that
  // joins at step S has nothing to push before it (seq S is its step S-1).
  void raise_to_spans();
  uint64_t slowest_clock() const;
  void apply_dense(uint64_t begin, const float* g, size_t n);
  void apply_dense_bytes(uint64_t begin, const unsigned char* g, size_t n);
  void apply_sparse(uint64_t key, float g);
  void mark_dense(size_t off, size_t n);

  shard_config cfg_;
  std::vector<float> dense_, slot1_, slot2_;
  std::unordered_map<uint64_t, sparse_entry> sparse_;
  std::unordered_map<uint64_t, float> sparse_sum_;  // a BSP step's sparse gradient, reused
  std::vector<uint64_t> applied_;       // per worker: highest seq applied
  std::vector<uint64_t> received_;      // per worker: highest seq applied or held
  std::vector<uint64_t> worker_clock_;  // per worker: last pushed step + 1
  std::vector<std::deque<decoded<schema::Push>>> held_;  // BSP pushes waiting for their step
  std::vector<uint32_t> step_workers_;  // the workers of the BSP step being applied, in id order
  uint64_t version_ = 0;
  uint64_t bsp_clock_ = 0;
  uint64_t optimizer_steps_ = 0;
  std::vector<float> scratch_;  // gradient sums and copies, reused
  std::vector<embedding_table> tables_;
  std::vector<uint64_t> dense_changed_;  // a bit per dense chunk changed since clear_changes()
  table_row_source rows_;
  summed_rows table_sum_;                 // a BSP step's rows of one table, reused
  std::vector<row_block_view> table_blocks_;  // reused
};

}  // namespace keel
