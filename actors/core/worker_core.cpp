#include "actors/core/worker_core.hpp"

#include <algorithm>
#include <cstring>

#include "actors/core/shard_core.hpp"  // default_slot_owners
#include "messages/decode.hpp"
#include "messages/errors.hpp"
#include "messages/validate.hpp"

namespace keel {

using Status = schema::PushAck::Status;

worker_core::worker_core(worker_core_config cfg) : cfg_(std::move(cfg)) {
  auto n = num_shards();
  incarnation_.assign(n, 0);
  epoch_.assign(n, 0);
  done_.assign(n, 0);
  shard_keys_.resize(n);
  dense_.assign(cfg_.dense_size, 0.0f);
  log_ = replay_log(n);
  max_acked_.assign(n, 0);
  resume_from_.assign(n, 0);
  prev_cover_.assign(n, 0);
  report_.worker = cfg_.worker;
  if (!cfg_.table_dims.empty()) {
    slots_ = slot_map::from_owners(default_slot_owners(n), n).operator*();
    auto t = cfg_.table_dims.size();
    table_keys_.resize(t);
    table_split_.resize(t);
    table_rows_.resize(t);
    table_views_.resize(t);
  }
}

void worker_core::begin_phase(worker_phase p) {
  phase_ = p;
  paused_ = false;
  ++generation_;
  std::fill(done_.begin(), done_.end(), 0);
  pending_ = num_shards();
}

void worker_core::halt() {
  phase_ = worker_phase::halted;
  paused_ = false;
  ++generation_;
}

std::string worker_core::halt_because(std::string why) {
  halt();
  rollback_reason_ = std::move(why);
  return *rollback_reason_;
}

// ---- Shards coming and going ----------------------------------------------

worker_core::shard_action worker_core::shard_up(uint32_t shard, uint64_t incarnation) {
  bool first = incarnation_.at(shard) == 0;
  incarnation_[shard] = std::max<uint64_t>(incarnation, 1);
  if (phase_ == worker_phase::resolving) {
    if (std::any_of(incarnation_.begin(), incarnation_.end(), [](uint64_t i) { return i == 0; }))
      return shard_action::none;
    begin_phase(worker_phase::resuming);
    return shard_action::resume;
  }
  if (phase_ == worker_phase::resuming && !first) {
    // An answer its previous incarnation gave no longer holds: the new one
    // may be restored from an older checkpoint. This core, being resumed,
    // has no log to replay from, so only the new answer can tell whether
    // the resume step is reachable or a rollback is needed.
    if (done_[shard]) {
      done_[shard] = 0;
      ++pending_;
    }
    return shard_action::ask_status;
  }
  if (phase_ == worker_phase::halted)
    return shard_action::none;
  return shard_action::replay;
}

// A shard restored from a checkpoint lacks what this worker pushed after it.
// When the log no longer holds that (this worker restarted too, or the shard
// fell back to an older checkpoint), only a rollback recovers.
worker_core::replay_plan worker_core::replay(uint32_t shard, uint64_t received) {
  replay_plan plan;
  if (phase_ == worker_phase::halted)
    return plan;
  uint64_t last_sent = step_ + (phase_ == worker_phase::pushing ? 1 : 0);
  auto first = log_.first_seq(shard);
  if (received < last_sent && (first == 0 || received + 1 < first)) {
    plan.rollback = halt_because(
        cfg_.shard_names[shard] + " restored to seq " + std::to_string(received) + " of worker " +
        std::to_string(cfg_.worker) + ", whose log starts at " + std::to_string(first));
    return plan;
  }
  plan.resend = addressed(shard, log_.after(shard, received));
  report_.replayed += plan.resend.size();
  plan.pull_again = phase_ == worker_phase::pulling && !done_[shard];
  return plan;
}

// ---- Resume after a restart ------------------------------------------------

bool worker_core::status_open(uint64_t gen) const {
  return gen == generation_ && phase_ == worker_phase::resuming;
}

worker_core::resume_outcome worker_core::status_received(uint64_t gen, uint32_t shard,
                                                         uint64_t received) {
  if (!status_open(gen) || done_.at(shard))
    return resume_outcome::pending;
  resume_from_[shard] = received;
  done_[shard] = 1;
  if (--pending_ > 0)
    return resume_outcome::pending;
  step_ = *std::min_element(resume_from_.begin(), resume_from_.end());
  auto ahead = *std::max_element(resume_from_.begin(), resume_from_.end());
  max_acked_ = resume_from_;
  // Under BSP, recomputing step `step_` needs every shard's parameters at
  // that clock; shards that already hold later pushes of this worker have
  // moved on, so only a rollback reproduces the run exactly.
  if (cfg_.rule == consistency_kind::bsp && ahead > step_) {
    halt_because("restarted worker " + std::to_string(cfg_.worker) + " lost pushes " +
                 std::to_string(step_ + 1) + ".." + std::to_string(ahead) +
                 " that a restored shard needs");
    return resume_outcome::rollback;
  }
  return resume_outcome::start;
}

// ---- The step loop ---------------------------------------------------------

worker_core::step_start worker_core::next_step() {
  if (step_ >= cfg_.total_steps) {
    phase_ = worker_phase::finished;
    report_.steps = step_;
    report_.pushes_acked = 0;
    for (auto a : max_acked_) report_.pushes_acked += a;
    report_.epoch = cfg_.epoch;
    report_.peak_log_bytes = log_.peak_bytes();
    return step_start::finished;
  }
  if (cfg_.windowed && step_ >= window_) {
    phase_ = worker_phase::waiting;
    return step_start::waiting;
  }
  paused_ = over_bound();
  if (paused_) {
    phase_ = worker_phase::waiting;
    return step_start::paused;
  }
  return step_start::pull;
}

bool worker_core::over_bound() const {
  auto every = cfg_.checkpoint_every;
  if (cfg_.log_bound == 0 || every == 0 || step_ == 0 || step_ % every != 0 ||
      log_.bytes() <= cfg_.log_bound)
    return false;
  return *std::min_element(prev_cover_.begin(), prev_cover_.end()) < step_;
}

bool worker_core::release_backpressure() {
  if (!paused_)
    return false;
  // Every shard's part of the commit must have come: until then the
  // truncation of all a commit covers goes on (see Backpressure).
  if (phase_ != worker_phase::waiting ||
      *std::min_element(prev_cover_.begin(), prev_cover_.end()) < step_)
    return false;
  paused_ = false;
  return true;
}

bool worker_core::widen_window(uint64_t limit) {
  window_ = std::max(window_, limit);
  return phase_ == worker_phase::waiting && !paused_ && step_ < window_;
}

void worker_core::begin_pull(const std::vector<uint64_t>& model_keys, const table_key_lists& table_keys) {
  for (size_t t = 0; t < table_keys_.size(); ++t) {
    static const std::vector<uint64_t> none;
    auto& keys = t < table_keys.size() ? table_keys[t] : none;
    table_keys_[t].assign(keys.begin(), keys.end());
    split_by_shard(*slots_, keys.data(), keys.size(), table_split_[t]);
    table_rows_[t].resize(keys.size() * cfg_.table_dims[t]);
  }
  model_keys_.assign(model_keys.begin(), model_keys.end());
  sparse_values_.resize(model_keys_.size());
  for (auto& k : shard_keys_) k.clear();
  for (auto k : model_keys_)
    shard_keys_[shard_of(cfg_.parts, cfg_.dense_size + k)].push_back(cfg_.dense_size + k);
  begin_phase(worker_phase::pulling);
}

pull_request_msg make_pull_request(uint32_t worker, uint32_t shard, uint64_t epoch, uint64_t clock,
                                   key_range range, const std::vector<uint64_t>& keys,
                                   const std::vector<shard_split>& tables) {
  size_t words = 64 + keys.size();
  for (auto& t : tables) words += 4 + t.count(shard);
  return build<schema::PullRequest>(words, [&](schema::PullRequest::Builder b) {
    b.setWorker(worker);
    b.setShardEpoch(epoch);
    b.setShard(shard);
    b.setClock(clock);
    if (range.size() > 0) {
      auto d = b.initDense(1);
      d[0].setBegin(range.begin);
      d[0].setEnd(range.end);
    }
    auto k = b.initSparseKeys(keys.size());
    for (unsigned i = 0; i < keys.size(); ++i) k.set(i, keys[i]);
    unsigned asked = 0;
    for (auto& t : tables) asked += t.count(shard) > 0;
    auto out = b.initTables(asked);
    unsigned j = 0;
    for (uint32_t t = 0; t < tables.size(); ++t) {
      size_t n = tables[t].count(shard);
      if (n == 0)
        continue;
      out[j].setTable(t);
      std::memcpy(out[j++].initKeys(n * 8).begin(), tables[t].keys_of(shard), n * 8);
    }
  });
}

pull_request_msg worker_core::pull_request(uint32_t shard) const {
  return make_pull_request(cfg_.worker, shard, epoch_.at(shard), step_, cfg_.parts.at(shard).dense,
                           shard_keys_.at(shard), table_split_);
}

std::optional<pull_request_msg> worker_core::early_pull_request(uint32_t shard) const {
  const uint64_t next = step_ + 1;
  if (phase_ != worker_phase::pushing || cfg_.rule != consistency_kind::bsp || !cfg_.dense_only ||
      next >= cfg_.total_steps || (cfg_.windowed && next >= window_) || shard >= num_shards())
    return std::nullopt;
  static const std::vector<uint64_t> no_keys;
  return make_pull_request(cfg_.worker, shard, epoch_[shard], next, cfg_.parts[shard].dense, no_keys);
}

bool worker_core::pull_open(uint64_t gen, uint32_t shard) const {
  return gen == generation_ && phase_ == worker_phase::pulling && !done_.at(shard);
}

bool worker_core::accepts_pull_reply(uint32_t shard, uint64_t clock) const {
  return phase_ == worker_phase::pulling && shard < num_shards() && !done_[shard] && clock == step_;
}

size_t worker_core::sparse_offset(uint32_t shard) const {
  size_t offset = 0;
  for (uint32_t i = 0; i < shard; ++i) offset += shard_keys_[i].size();
  return offset;
}

caf::expected<bool> worker_core::pulled(uint32_t shard, schema::PullReply::Reader reply) {
  if (!from_current(shard, reply.getShardEpoch()))
    return false;
  auto range = cfg_.parts.at(shard).dense;
  for (auto d : reply.getDense()) {
    auto v = d.getValues();
    if (d.getBegin() < range.begin || d.getEnd() > range.end)
      return make_error(errc::invalid_field, "pull reply from shard " + std::to_string(shard) +
                                                 " holds keys outside its range");
    std::memcpy(dense_.data() + d.getBegin(), v.begin(), v.size());
  }
  // Sparse values land in model-key order: shards own ascending key slices.
  auto& keys = shard_keys_[shard];
  auto vals = reply.getSparse().getValues();
  if (vals.size() != keys.size())
    return make_error(errc::invalid_field, "pull reply from shard " + std::to_string(shard) +
                                               " has " + std::to_string(vals.size()) +
                                               " sparse values for " + std::to_string(keys.size()) +
                                               " keys");
  auto offset = sparse_offset(shard);
  for (unsigned i = 0; i < vals.size(); ++i) sparse_values_[offset + i] = vals[i];
  if (auto err = pulled_tables(shard, reply))
    return err;
  done_[shard] = 1;
  return --pending_ == 0;
}

caf::error take_pulled_rows(uint32_t shard, schema::PullReply::Reader reply, const std::vector<shard_split>& tables,
                            const std::vector<uint32_t>& dims, std::vector<std::vector<float>>& rows) {
  auto blocks = reply.getTables();
  unsigned b = 0;
  for (uint32_t t = 0; t < tables.size(); ++t) {
    size_t n = tables[t].count(shard);
    if (n == 0)
      continue;
    auto where = "pull reply from shard " + std::to_string(shard) + ": table " + std::to_string(t);
    if (b >= blocks.size() || blocks[b].getTable() != t)
      return make_error(errc::invalid_field, where + " is missing");
    auto block = blocks[b++];
    uint32_t dim = dims[t];
    if (block.getDim() != dim || block.getRows().size() != n * dim * 4)
      return make_error(errc::invalid_field, where + " has " + std::to_string(block.getRows().size()) +
                                               " bytes of rows of " + std::to_string(block.getDim()) +
                                               " for " + std::to_string(n) + " keys of " + std::to_string(dim));
    auto from = block.getRows().begin();
    auto pos = tables[t].positions_of(shard);
    for (size_t i = 0; i < n; ++i) std::memcpy(rows[t].data() + pos[i] * dim, from + i * dim * 4, dim * 4);
  }
  if (b != blocks.size())
    return make_error(errc::invalid_field, "pull reply from shard " + std::to_string(shard) + " has " +
                                             std::to_string(blocks.size()) + " table blocks for " +
                                             std::to_string(b) + " asked");
  return {};
}

caf::error worker_core::pulled_tables(uint32_t shard, schema::PullReply::Reader reply) {
  return take_pulled_rows(shard, reply, table_split_, cfg_.table_dims, table_rows_);
}

parameter_view worker_core::parameters() const {
  parameter_view v{dense_, model_keys_, span<const float>(sparse_values_.data(), model_keys_.size())};
  if (!table_views_.empty()) {
    auto& views = const_cast<std::vector<table_rows>&>(table_views_);  // a cache of spans, not state
    for (size_t t = 0; t < views.size(); ++t)
      views[t] = {table_keys_[t], table_rows_[t]};
    v.tables = span<const table_rows>(views.data(), views.size());
  }
  return v;
}

bool worker_core::push_tables(uint32_t shard, const gradient_buffer& grad, schema::Push::Builder b,
                              frame_builder&) const {
  unsigned count = 0;
  for (auto& t : table_split_) count += t.count(shard) > 0;
  auto out = b.initTables(count);
  bool finite = true;
  unsigned j = 0;
  for (uint32_t t = 0; t < table_split_.size(); ++t) {
    auto& split = table_split_[t];
    size_t n = split.count(shard);
    if (n == 0)
      continue;
    uint32_t dim = cfg_.table_dims[t];
    auto block = out[j++];
    block.setTable(t);
    block.setDim(dim);
    std::memcpy(block.initKeys(n * 8).begin(), split.keys_of(shard), n * 8);
    auto rows = block.initRows(n * dim * 4).begin();
    auto pos = split.positions_of(shard);
    const float* g = grad.tables.at(t).rows.data();
    for (size_t i = 0; i < n; ++i)
      std::memcpy(rows + i * dim * 4, g + pos[i] * dim, dim * 4);
    finite = finite && all_finite(rows, n * dim);
  }
  return finite;
}

size_t worker_core::table_push_words(uint32_t shard) const {
  size_t words = 1;  // the list's tag
  for (uint32_t t = 0; t < table_split_.size(); ++t) {
    size_t n = table_split_[t].count(shard);
    if (n > 0)  // the block's struct (1 data word, 2 pointers), its keys, its rows
      words += 3 + n + (n * cfg_.table_dims[t] * 4 + 7) / 8;
  }
  return words;
}

push_msg worker_core::make_push(uint32_t shard, const gradient_buffer& grad, bool empty,
                                bool* finite) const {
  auto range = cfg_.parts[shard].dense;
  auto& keys = shard_keys_[shard];
  auto offset = sparse_offset(shard);
  *finite = true;
  // The dense values go into a buffer of their own (copy_floats: one pass
  // that also checks them, no zero-fill first), the rest into the message's
  // first segment, sized for all of it (table_push_words): built in
  // segments that grow by doubling, each in a power-of-two buffer, a ctr-fm
  // push held 2.3 times its bytes, and replay logs keep pushes.
  frame_builder fb(64 + keys.size() * 2 + (empty || table_split_.empty() ? 0 : table_push_words(shard)));
  auto b = fb.message().initRoot<schema::Push>();
  b.setVersion(schema::PROTOCOL_VERSION);
  b.setWorker(cfg_.worker);
  b.setSeq(step_ + 1);
  b.setStep(step_);
  b.setShard(shard);
  b.setShardEpoch(epoch_[shard]);
  if (!empty) {
    if (range.size() > 0) {
      auto d = b.initDense(1)[0];
      d.setBegin(range.begin);
      d.setEnd(range.end);
      d.adoptValues(fb.copy_floats(grad.dense.data() + range.begin, range.size(), finite));
    }
    auto s = b.initSparse();
    auto k = s.initKeys(keys.size());
    auto v = s.initValues(keys.size());
    for (unsigned i = 0; i < keys.size(); ++i) {
      k.set(i, keys[i]);
      v.set(i, grad.sparse_values[offset + i]);
    }
    if (!table_split_.empty() && !push_tables(shard, grad, b, fb))
      *finite = false;
  }
  return push_msg(fb.finish());
}

worker_core::push_round worker_core::begin_push(const gradient_buffer& grad) {
  // A gradient with a NaN or an infinity is not pushed: each shard gets an
  // empty push for the step instead. The dense values are checked as they
  // are copied into the pushes; the rare bad step builds them again, empty.
  push_round round;
  auto build = [&](bool empty) {
    bool finite = true;
    round.pushes.clear();
    for (uint32_t i = 0; i < num_shards(); ++i) {
      bool f = true;
      round.pushes.push_back(make_push(i, grad, empty, &f));
      finite = finite && f;
    }
    return finite;
  };
  round.skipped = !all_finite(grad.sparse_values.data(), grad.sparse_values.size());
  if (!build(round.skipped)) {
    round.skipped = true;
    build(true);
  }
  if (round.skipped)
    ++report_.skipped_steps;
  else
    report_.last_loss = grad.loss;
  begin_phase(worker_phase::pushing);
  for (uint32_t i = 0; i < num_shards(); ++i)
    log_.append(i, step_ + 1, round.pushes[i]);
  // Without checkpoints nothing ever truncates the log: over its bound, the
  // oldest pushes go (every shard acknowledged them), never this step's.
  if (cfg_.checkpoint_every == 0 && cfg_.log_bound > 0)
    log_.drop_oldest(cfg_.log_bound, step_ + 1);
  return round;
}

bool worker_core::push_open(uint64_t gen, uint32_t shard) const {
  return gen == generation_ && phase_ == worker_phase::pushing && !done_.at(shard);
}

std::vector<push_msg> worker_core::unacked(uint32_t shard) const {
  return addressed(shard, log_.after(shard, step_));
}

// A logged push names the epoch its shard had when it was built; resent to
// a newer incarnation it is copied to name that one (rare: replays only).
std::vector<push_msg> worker_core::addressed(uint32_t shard, std::vector<push_msg> pushes) const {
  for (auto& m : pushes) {
    auto d = decode(m);
    if (!d || d->root().getShardEpoch() == epoch_[shard])
      continue;
    frame_builder fb(m.frame()->size_words() + 8);
    fb.message().setRoot(d->root());
    fb.message().getRoot<schema::Push>().setShardEpoch(epoch_[shard]);
    m = push_msg(fb.finish());
  }
  return pushes;
}

caf::expected<worker_core::ack_outcome> worker_core::acked(uint32_t shard,
                                                           schema::PushAck::Reader ack) {
  ack_outcome out;
  if (phase_ == worker_phase::halted || !from_current(shard, ack.getShardEpoch()))
    return out;
  switch (ack.getStatus()) {
    case Status::APPLIED:
    case Status::ACCEPTED:
    case Status::DUPLICATE:
      max_acked_[shard] = std::max(max_acked_[shard], ack.getSeq());
      break;
    case Status::OUT_OF_ORDER: {
      auto expected = ack.getExpectedSeq();
      auto first = log_.first_seq(shard);
      uint64_t last_sent = step_ + (phase_ == worker_phase::pushing ? 1 : 0);
      if (expected > last_sent)
        return out;  // the shard is only waiting for what this worker sends next
      if (first == 0 || expected < first) {
        out.rollback = halt_because(
            cfg_.shard_names[shard] + " needs push " + std::to_string(expected) + " of worker " +
            std::to_string(cfg_.worker) + ", which its log no longer holds");
        return out;
      }
      out.resend = addressed(shard, log_.after(shard, expected - 1));
      return out;
    }
    case Status::REJECTED:
      return make_error(errc::invalid_field, cfg_.shard_names[shard] + " rejected push " +
                                                 std::to_string(ack.getSeq()) + ": " +
                                                 ack.getReason().cStr());
  }
  if (ack.getSeq() == step_ + 1)
    out.step_complete = step_pushed(shard);
  return out;
}

// The current step's push to `shard` is known applied: acknowledged, or
// covered by a committed checkpoint (its ack may have been lost).
bool worker_core::step_pushed(uint32_t shard) {
  if (phase_ != worker_phase::pushing || done_[shard])
    return false;
  done_[shard] = 1;
  if (--pending_ > 0)
    return false;
  ++step_;
  return true;
}

bool worker_core::checkpoint_committed(uint32_t shard, uint64_t covered) {
  if (shard < prev_cover_.size()) {
    log_.truncate(shard, paused_ ? covered : prev_cover_[shard]);  // see Backpressure
    prev_cover_[shard] = std::max(prev_cover_[shard], covered);
  }
  // A checkpoint holding this step's push means the shard applied it, even
  // if its ack never arrived; the log no longer holds it to resend.
  if (shard >= num_shards() || phase_ != worker_phase::pushing || covered < step_ + 1)
    return false;
  max_acked_[shard] = std::max(max_acked_[shard], step_ + 1);
  return step_pushed(shard);
}

worker_core::retry_action worker_core::retry(uint64_t gen, uint32_t shard, bool push) const {
  if (gen != generation_ || done_.at(shard))
    return retry_action::none;
  if (!push && phase_ == worker_phase::pulling)
    return retry_action::pull;
  if (!push && phase_ == worker_phase::resuming)
    return retry_action::status;
  if (push && phase_ == worker_phase::pushing)
    return retry_action::push;
  return retry_action::none;
}

}  // namespace keel
