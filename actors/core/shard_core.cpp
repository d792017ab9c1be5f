#include "actors/core/shard_core.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "actors/core/tensor_recycler.hpp"
#include "actors/core/update_rules.hpp"
#include "messages/errors.hpp"

namespace keel {

namespace {

using Status = schema::PushAck::Status;

push_outcome refuse(Status s, std::string reason, uint64_t expected = 0) {
  push_outcome o;
  o.status = s;
  o.reason = std::move(reason);
  o.expected_seq = expected;
  return o;
}

std::string range_text(uint64_t b, uint64_t e) {
  return "[" + std::to_string(b) + "," + std::to_string(e) + ")";
}

std::string shard_text(uint32_t shard) { return "shard " + std::to_string(shard); }

// Capnp Data blobs start on a word boundary, so keys and rows are read in place.
const uint64_t* keys_of(capnp::Data::Reader d) { return reinterpret_cast<const uint64_t*>(d.begin()); }
const float* floats_of(capnp::Data::Reader d) { return reinterpret_cast<const float*>(d.begin()); }

// The tables of `cfg`, empty, with rows from `rows`.
caf::expected<std::vector<embedding_table>> make_tables(const shard_config& cfg, const table_row_source& rows) {
  std::vector<embedding_table> out;
  if (cfg.tables.empty())
    return out;
  if (cfg.table_slot_owners.empty() || !rows)
    return make_error(errc::invalid_argument, shard_text(cfg.shard) + ": the model has " +
                                                std::to_string(cfg.tables.size()) + " tables but the shard has " +
                                                (rows ? "no slot map" : "no initial rows for them"));
  for (uint32_t t = 0; t < cfg.tables.size(); ++t) {
    auto init = [rows, t](uint64_t key, float* v, uint32_t dim) { rows(t, key, v, dim); };
    auto table = embedding_table::make(shard_table_config(cfg, t), init);
    if (!table)
      return make_error(errc::invalid_argument, shard_text(cfg.shard) + ": " + describe(table.error()));
    out.push_back(std::move(*table));
  }
  return out;
}

}  // namespace

shard_core::~shard_core() {
  tensor_recycler::give(dense_);
  tensor_recycler::give(slot1_);
  tensor_recycler::give(slot2_);
}

caf::expected<shard_core> shard_core::make(shard_config cfg, std::vector<float> initial_dense,
                                           table_row_source rows) {
  if (auto err = check_rules(cfg))
    return err;
  if (initial_dense.size() != cfg.dense.size())
    return make_error(errc::invalid_argument, "shard " + std::to_string(cfg.shard) + ": " +
                                                std::to_string(initial_dense.size()) +
                                                " initial values for a dense range of " +
                                                std::to_string(cfg.dense.size()) + " keys");
  auto tables = make_tables(cfg, rows);
  if (!tables)
    return tables.error();
  shard_core core(std::move(cfg), std::move(initial_dense));
  core.tables_ = std::move(*tables);
  core.rows_ = std::move(rows);
  return core;
}

shard_core::shard_core(shard_config cfg, std::vector<float> initial_dense)
  : cfg_(std::move(cfg)),
    dense_(std::move(initial_dense)),
    applied_(cfg_.num_workers, 0),
    received_(cfg_.num_workers, 0),
    worker_clock_(cfg_.num_workers, 0),
    held_(cfg_.num_workers) {
  raise_to_spans();
  initial_dense_slots(cfg_, slot1_, slot2_);
}

caf::expected<shard_core> shard_core::restored(shard_config cfg, state s, table_row_source rows) {
  if (auto err = check_rules(cfg))
    return err;
  if (s.dense.size() != cfg.dense.size())
    return make_error(errc::invalid_argument, "shard " + std::to_string(cfg.shard) + ": " +
                                                std::to_string(s.dense.size()) +
                                                " restored values for a dense range of " +
                                                std::to_string(cfg.dense.size()) + " keys");
  if (s.tables.size() != cfg.tables.size())
    return make_error(errc::invalid_argument, "shard " + std::to_string(cfg.shard) + ": " +
                                                std::to_string(s.tables.size()) + " restored tables for " +
                                                std::to_string(cfg.tables.size()) + " in the layout");
  shard_core core;
  core.cfg_ = std::move(cfg);
  core.rows_ = std::move(rows);
  core.assign(std::move(s));
  return core;
}

caf::error shard_core::check_keys(schema::Push::Reader p) const {
  for (auto r : p.getDense())
    if (!cfg_.dense.contains(r.getBegin(), r.getEnd()))
      return make_error(errc::invalid_field,
                        "keel.Push.dense: range " + range_text(r.getBegin(), r.getEnd()) +
                          " is not inside shard " + std::to_string(cfg_.shard) + "'s dense keys " +
                          range_text(cfg_.dense.begin, cfg_.dense.end));
  for (auto k : p.getSparse().getKeys())
    if (!cfg_.sparse.contains(k))
      return make_error(errc::invalid_field,
                        "keel.Push.sparse: key " + std::to_string(k) + " is not inside shard " +
                          std::to_string(cfg_.shard) + "'s sparse keys " +
                          range_text(cfg_.sparse.begin, cfg_.sparse.end));
  return check_tables(p);
}

// A block for a table this shard holds, of its d, with keys of its slots
// (the message's own checks, messages/validate.cpp, did shape and finiteness).
caf::error shard_core::check_tables(schema::Push::Reader p) const {
  auto blocks = p.getTables();
  for (unsigned i = 0; i < blocks.size(); ++i) {
    auto b = blocks[i];
    auto at = "keel.Push.tables[" + std::to_string(i) + "]";
    if (b.getTable() >= tables_.size())
      return make_error(errc::invalid_field, at + ".table: table " + std::to_string(b.getTable()) + ", but " +
                                               shard_text(cfg_.shard) + " holds " +
                                               std::to_string(tables_.size()) + " tables");
    auto& table = tables_[b.getTable()];
    if (b.getDim() != table.dim())
      return make_error(errc::invalid_field, at + ".dim: " + std::to_string(b.getDim()) + ", but table '" +
                                               table.name() + "' has rows of " + std::to_string(table.dim()));
    const uint64_t* keys = keys_of(b.getKeys());
    size_t n = b.getKeys().size() / 8;
    for (size_t k = 0; k < n; ++k)
      if (!table.config().slots.contains_key(keys[k]))
        return make_error(errc::invalid_field, at + ".keys: key " + std::to_string(keys[k]) + " of table '" +
                                                 table.name() + "' is not in " + shard_text(cfg_.shard) +
                                                 "'s hash slots");
  }
  return {};
}

push_outcome shard_core::offer(decoded<schema::Push> push) {
  auto p = push.root();
  auto w = p.getWorker();
  if (w >= cfg_.num_workers)
    return refuse(Status::REJECTED, "worker " + std::to_string(w) + " is not one of this job's " +
                                      std::to_string(cfg_.num_workers) + " workers");
  auto seq = p.getSeq();
  if (seq <= received_[w])
    return refuse(Status::DUPLICATE, {});
  if (seq != received_[w] + 1)
    return refuse(Status::OUT_OF_ORDER,
                  "seq " + std::to_string(seq) + " skips ahead of " + std::to_string(received_[w] + 1),
                  received_[w] + 1);
  if (!takes_part(w, p.getStep())) {
    auto span = cfg_.workers.span(w);
    return refuse(Status::REJECTED, "worker " + std::to_string(w) + " takes part in steps " +
                                      std::to_string(span.begin) + " to " +
                                      (span.end == UINT64_MAX ? std::string("the end") : std::to_string(span.end - 1)) +
                                      ", not in step " + std::to_string(p.getStep()));
  }
  if (auto err = check_keys(p))
    return refuse(Status::REJECTED, describe(err));
  if (cfg_.rule.kind != consistency_kind::bsp) {
    apply_now(p);
    applied_[w] = received_[w] = seq;
    worker_clock_[w] = std::max(worker_clock_[w], p.getStep() + 1);
    return {};
  }
  // BSP: a worker's steps arrive in seq order; the held queue is ordered.
  uint64_t last_step = held_[w].empty() ? bsp_clock_ : held_[w].back().root().getStep() + 1;
  if (p.getStep() < last_step)
    return refuse(Status::REJECTED, "step " + std::to_string(p.getStep()) +
                                      " is already complete or held (next is " +
                                      std::to_string(last_step) + ")");
  received_[w] = seq;
  worker_clock_[w] = std::max(worker_clock_[w], p.getStep() + 1);
  held_[w].push_back(std::move(push));
  push_outcome o;
  o.status = Status::ACCEPTED;
  o.steps_applied = apply_complete_steps();
  return o;
}

// Applies every BSP step for which each worker's push is held, in step order.
uint64_t shard_core::apply_complete_steps() {
  uint64_t steps = 0;
  for (;;) {
    step_workers_.clear();
    for (uint32_t w = 0; w < held_.size(); ++w) {
      if (!takes_part(w, bsp_clock_))
        continue;
      auto& q = held_[w];
      if (q.empty() || q.front().root().getStep() != bsp_clock_) {
        // A worker that skipped this step (its next push is for a later one)
        // still blocks it: BSP waits for every worker's step-k push.
        return steps;
      }
      step_workers_.push_back(w);
    }
    if (step_workers_.size() == 1) {
      // One worker: its push is the step's sum, applied from its frame.
      auto w = step_workers_[0];
      auto p = held_[w].front().root();
      apply_now(p);
      applied_[w] = p.getSeq();
      held_[w].pop_front();
      ++bsp_clock_;
      ++steps;
      continue;
    }
    // Several workers: their gradients summed in worker-id order, applied once.
    ++optimizer_steps_;
    if (!apply_dense_one_pass())
      apply_dense_summed();
    apply_sparse_summed();
    apply_tables_summed();
    for (auto w : step_workers_) {
      applied_[w] = held_[w].front().root().getSeq();
      held_[w].pop_front();
    }
    ++bsp_clock_;
    ++version_;
    ++steps;
  }
}

// The usual BSP step: every worker pushed one dense range, the same one,
// and their number fits apply_update_sum. The sum then goes straight into
// the update, read from the pushes' frames, in one pass instead of zeroing
// a sum, adding each push into it and applying it; the same order of
// additions, so the same bits. False (nothing done) for any other step.
bool shard_core::apply_dense_one_pass() {
  const size_t k = step_workers_.size();
  if (k < 2 || k > max_summed_gradients)
    return false;
  const unsigned char* grads[max_summed_gradients];
  uint64_t b = 0, e = 0;
  for (size_t w = 0; w < k; ++w) {
    auto dense = held_[step_workers_[w]].front().root().getDense();
    if (dense.size() != 1)
      return false;
    auto r = dense[0];
    if (w == 0) {
      b = r.getBegin();
      e = r.getEnd();
    } else if (r.getBegin() != b || r.getEnd() != e) {
      return false;
    }
    grads[w] = r.getValues().begin();
  }
  mark_dense(b - cfg_.dense.begin, e - b);
  for_each_rule_run(cfg_, b, e - b, [&](const optimizer_config& rule, uint64_t from, uint64_t n) {
    const size_t off = from - cfg_.dense.begin;
    const unsigned char* at[max_summed_gradients];
    for (size_t w = 0; w < k; ++w) at[w] = grads[w] + 4 * (from - b);
    apply_update_sum(rule, optimizer_steps_, dense_.data() + off, slot1_.empty() ? nullptr : slot1_.data() + off,
                     slot2_.empty() ? nullptr : slot2_.data() + off, at, k, n);
  });
  return true;
}

// Any other step: the dense gradients summed into a zeroed array in
// worker-id order, then each touched run of keys applied once.
void shard_core::apply_dense_summed() {
  // Reused across steps: a fresh vector per step would page-fault anew.
  auto& sum = scratch_;
  sum.assign(dense_.size(), 0.0f);
  std::vector<std::pair<uint64_t, uint64_t>> touched;
  for (auto w : step_workers_) {
    for (auto r : held_[w].front().root().getDense()) {
      auto v = r.getValues();
      size_t off = r.getBegin() - cfg_.dense.begin;
      size_t n = r.getEnd() - r.getBegin();
      for (size_t i = 0; i < n; ++i) {
        float g;
        std::memcpy(&g, v.begin() + 4 * i, 4);
        sum[off + i] += g;
      }
      touched.emplace_back(off, off + n);
    }
  }
  std::sort(touched.begin(), touched.end());
  for (size_t i = 0; i < touched.size();) {
    auto b = touched[i].first, e = touched[i].second;
    for (++i; i < touched.size() && touched[i].first <= e; ++i)
      e = std::max(e, touched[i].second);
    apply_dense(cfg_.dense.begin + b, sum.data() + b, e - b);
  }
}

// Per key the workers' sparse values are added in worker-id order; keys are
// independent, so the order in which keys are then applied is free.
void shard_core::apply_sparse_summed() {
  auto& sparse_sum = sparse_sum_;
  sparse_sum.clear();
  for (auto w : step_workers_) {
    auto sp = held_[w].front().root().getSparse();
    auto keys = sp.getKeys();
    auto vals = sp.getValues();
    for (unsigned i = 0; i < keys.size(); ++i)
      sparse_sum[keys[i]] += vals[i];
  }
  for (auto& [key, g] : sparse_sum)
    apply_sparse(key, g);
}

void shard_core::apply_now(schema::Push::Reader p) {
  ++optimizer_steps_;
  for (auto r : p.getDense())
    apply_dense_bytes(r.getBegin(), r.getValues().begin(), r.getEnd() - r.getBegin());
  auto keys = p.getSparse().getKeys();
  auto vals = p.getSparse().getValues();
  for (unsigned i = 0; i < keys.size(); ++i)
    apply_sparse(keys[i], vals[i]);
  apply_tables_now(p);
  ++version_;
}

namespace {

// A table apply after check_tables passed cannot fail; if it does, the
// shard's state is not what its acks promised, so the shard dies (its
// supervisor restarts it from a snapshot) rather than limp on.
void apply_or_die(embedding_table& t, const uint64_t* keys, size_t n, const float* grads, uint64_t step) {
  if (auto err = t.apply(keys, n, grads, n * t.dim(), step))
    throw std::logic_error("applying a checked push: " + describe(err));
}

}  // namespace

void shard_core::apply_tables_now(schema::Push::Reader p) {
  for (auto b : p.getTables())
    apply_or_die(tables_[b.getTable()], keys_of(b.getKeys()), b.getKeys().size() / 8, floats_of(b.getRows()),
                 optimizer_steps_);
}

// Per table, the held pushes' blocks summed per key in worker-id order, then
// applied once (as dense gradients are summed).
void shard_core::apply_tables_summed() {
  for (uint32_t t = 0; t < tables_.size(); ++t) {
    table_blocks_.clear();
    for (auto w : step_workers_)
      for (auto b : held_[w].front().root().getTables())
        if (b.getTable() == t)
          table_blocks_.push_back({keys_of(b.getKeys()), b.getKeys().size() / 8, floats_of(b.getRows())});
    if (table_blocks_.empty())
      continue;
    if (auto err = sum_row_blocks(table_blocks_.data(), table_blocks_.size(), tables_[t].dim(), table_sum_))
      throw std::logic_error("summing checked pushes: " + describe(err));
    apply_or_die(tables_[t], table_sum_.keys.data(), table_sum_.keys.size(), table_sum_.grads.data(),
                 optimizer_steps_);
  }
}

void shard_core::apply_dense(uint64_t begin, const float* g, size_t n) {
  mark_dense(begin - cfg_.dense.begin, n);
  for_each_rule_run(cfg_, begin, n, [&](const optimizer_config& rule, uint64_t from, uint64_t m) {
    const size_t off = from - cfg_.dense.begin;
    apply_update(rule, optimizer_steps_, dense_.data() + off, slot1_.empty() ? nullptr : slot1_.data() + off,
                 slot2_.empty() ? nullptr : slot2_.data() + off, g + (from - begin), m);
  });
}

void shard_core::apply_dense_bytes(uint64_t begin, const unsigned char* g, size_t n) {
  mark_dense(begin - cfg_.dense.begin, n);
  for_each_rule_run(cfg_, begin, n, [&](const optimizer_config& rule, uint64_t from, uint64_t m) {
    const size_t off = from - cfg_.dense.begin;
    apply_update_bytes(rule, optimizer_steps_, dense_.data() + off, slot1_.empty() ? nullptr : slot1_.data() + off,
                       slot2_.empty() ? nullptr : slot2_.data() + off, g + 4 * (from - begin), m);
  });
}

void shard_core::apply_sparse(uint64_t key, float g) {
  auto [it, fresh] = sparse_.try_emplace(key);
  if (fresh) {
    it->second.slot1 = initial_slot(cfg_.optimizer, 0);
    it->second.slot2 = initial_slot(cfg_.optimizer, 1);
  }
  auto& e = it->second;
  apply_update(cfg_.optimizer, optimizer_steps_, &e.value, &e.slot1, &e.slot2, &g, 1);
}

caf::error shard_core::read(schema::PullRequest::Reader req, schema::PullReply::Builder reply,
                            frame_builder* fb) const {
  auto ranges = req.getDense();
  for (auto r : ranges)
    if (!cfg_.dense.contains(r.getBegin(), r.getEnd()))
      return make_error(errc::invalid_field, "keel.PullRequest.dense: range " +
                                               range_text(r.getBegin(), r.getEnd()) +
                                               " is not inside shard " + std::to_string(cfg_.shard) +
                                               "'s dense keys " +
                                               range_text(cfg_.dense.begin, cfg_.dense.end));
  auto keys = req.getSparseKeys();
  for (auto k : keys)
    if (!cfg_.sparse.contains(k))
      return make_error(errc::invalid_field, "keel.PullRequest.sparseKeys: key " + std::to_string(k) +
                                               " is not inside shard " + std::to_string(cfg_.shard) +
                                               "'s sparse keys");
  reply.setShard(cfg_.shard);
  reply.setClock(req.getClock());
  reply.setShardVersion(version_);
  auto out = reply.initDense(ranges.size());
  for (unsigned i = 0; i < ranges.size(); ++i) {
    auto b = ranges[i].getBegin(), e = ranges[i].getEnd();
    out[i].setBegin(b);
    out[i].setEnd(e);
    const float* from = dense_.data() + (b - cfg_.dense.begin);
    bool finite = false;  // the frame remembers it: the worker's decode then skips the scan
    if (fb)
      out[i].adoptValues(fb->copy_floats(from, e - b, &finite));
    else
      std::memcpy(out[i].initValues((e - b) * 4).begin(), from, (e - b) * 4);
  }
  auto sparse = reply.initSparse();
  auto out_keys = sparse.initKeys(keys.size());
  auto out_vals = sparse.initValues(keys.size());
  for (unsigned i = 0; i < keys.size(); ++i) {
    out_keys.set(i, keys[i]);
    auto it = sparse_.find(keys[i]);
    out_vals.set(i, it == sparse_.end() ? 0.0f : it->second.value);
  }
  return read_tables(req, reply);
}

caf::error shard_core::read_tables(schema::PullRequest::Reader req, schema::PullReply::Builder reply) const {
  auto asked = req.getTables();
  auto out = reply.initTables(asked.size());
  for (unsigned i = 0; i < asked.size(); ++i) {
    auto t = asked[i].getTable();
    if (t >= tables_.size())
      return make_error(errc::invalid_field, "keel.PullRequest.tables[" + std::to_string(i) + "].table: table " +
                                               std::to_string(t) + ", but " + shard_text(cfg_.shard) +
                                               " holds " + std::to_string(tables_.size()) + " tables");
    auto& table = tables_[t];
    size_t n = asked[i].getKeys().size() / 8;
    out[i].setTable(t);
    out[i].setDim(table.dim());
    auto keys = out[i].initKeys(n * 8);
    std::memcpy(keys.begin(), asked[i].getKeys().begin(), n * 8);
    auto rows = out[i].initRows(n * table.dim() * 4);
    if (auto err = table.pull(keys_of(asked[i].getKeys()), n, reinterpret_cast<float*>(rows.begin()),
                              n * table.dim()))
      return make_error(errc::invalid_field,
                        "keel.PullRequest.tables[" + std::to_string(i) + "]: " + describe(err));
  }
  return {};
}

void shard_core::assign(state s) {
  dense_ = std::move(s.dense);
  slot1_ = std::move(s.slot1);
  slot2_ = std::move(s.slot2);
  sparse_ = std::move(s.sparse);
  tables_ = std::move(s.tables);
  dense_changed_.clear();  // a restored state has no changes since its snapshot
  applied_ = s.applied;
  received_ = std::move(s.applied);
  worker_clock_ = std::move(s.worker_clock);
  held_ = std::vector<std::deque<decoded<schema::Push>>>(cfg_.num_workers);
  raise_to_spans();
  version_ = s.version;
  bsp_clock_ = s.bsp_clock;
  optimizer_steps_ = s.optimizer_steps;
}

}  // namespace keel
