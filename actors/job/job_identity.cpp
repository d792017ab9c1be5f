#include "actors/job/job_identity.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "messages/errors.hpp"
#include "messages/hex.hpp"
#include "storage/snapshot_store.hpp"

namespace keel {

namespace {

std::string sha256_hex(const std::string& text) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(text.data(), text.size(), md, &len, EVP_sha256(), nullptr);
  return hex_of(md, len);
}

std::string new_run_id() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1)
    return {};
  return hex_of(bytes, sizeof bytes);
}

std::string optimizer_text(const optimizer_config& o) {
  std::ostringstream s;
  s.precision(9);
  s << to_string(o.kind) << " lr " << o.lr;
  switch (o.kind) {
    case optimizer_kind::momentum: s << " momentum " << o.momentum; break;
    case optimizer_kind::adagrad:
      s << " epsilon " << o.epsilon << " initial_accumulator " << o.initial_accumulator;
      break;
    case optimizer_kind::adam:
      s << " beta1 " << o.beta1 << " beta2 " << o.beta2 << " epsilon " << o.epsilon;
      break;
    case optimizer_kind::custom:
      if (o.custom)
        s << " " << o.custom->name << " slots " << o.custom->slots << " initial " << o.custom->initial[0] << " "
          << o.custom->initial[1];
      break;
    default: break;
  }
  if (o.gradient_scale != 1.0f)  // only when set: other runs' texts stay as they were
    s << " gradient_scale " << o.gradient_scale;
  return s.str();
}

std::string layout_text(const parameter_layout& l) {
  std::string out;
  for (auto& t : l.dense()) {
    out += (out.empty() ? "" : "; ") + t.name + " [";
    for (size_t i = 0; i < t.shape.size(); ++i)
      out += (i ? "," : "") + std::to_string(t.shape[i]);
    out += "]";
  }
  if (l.sparse_key_count() > 0)
    out += (out.empty() ? "" : "; ") + l.sparse_name() + " sparse " + std::to_string(l.sparse_key_count());
  for (auto& t : l.tables())
    out += (out.empty() ? "" : "; ") + t.name + " table of rows of " + std::to_string(t.dim);
  return out;
}

}  // namespace

std::string run_configuration(const job_config& cfg) {
  auto& t = cfg.training;
  std::string out;
  auto field = [&](const char* name, const std::string& v) { out += std::string(name) + "=" + v + "\n"; };
  field("model", cfg.training_model ? cfg.training_model->name() : "");
  field("model_options", t.model_options);
  field("layout", cfg.training_model ? layout_text(cfg.training_model->layout()) : "");
  field("seed", std::to_string(t.seed));
  field("shards", std::to_string(t.shards));
  field("workers", std::to_string(t.workers));
  field("consistency", to_string(t.rule));
  field("optimizer", optimizer_text(t.optimizer));
  field("batch", std::to_string(t.batch_size));
  // Only when set: the configurations of runs without them stay as they were.
  if (t.combine != gradient_combine::sum)
    field("combine", to_string(t.combine));
  if (t.schedule.elastic())
    field("worker_changes", t.schedule.to_string());
  for (auto& [name, rule] : t.rules)
    field(("rule " + name).c_str(), optimizer_text(rule));
  if (t.tables.capacity_rows > 0 || t.tables.admit_after > 1)
    field("table_limits", "capacity " + std::to_string(t.tables.capacity_rows) + " rows, admission after " +
                              std::to_string(std::max<uint32_t>(1, t.tables.admit_after)) + " pushes");
  // Its own line, and only when it is not the default: LRU runs' identities
  // stay as they were. Without a capacity nothing is evicted.
  if (t.tables.capacity_rows > 0 && t.tables.eviction != eviction_policy::least_recently_updated)
    field("table_eviction", to_string(t.tables.eviction));
  return out;
}

caf::error check_same_run(const run_identity& ours, const run_identity& found, const std::string& where) {
  if (found.empty())
    return make_error(errc::invalid_argument,
                      where + " carries no run identity (written by a keel from before run ids): "
                              "keel cannot tell whose run it is; continue it with the keel that wrote it, "
                              "or start afresh in an empty directory");
  if (found.run_id != ours.run_id)
    return make_error(errc::invalid_argument, where + " is of run " + found.run_id + ", not of this run " +
                                                ours.run_id + " (a checkpoint of another run)");
  if (found.config_hash != ours.config_hash) {
    auto diff = config_difference(found.config, ours.config);
    return make_error(errc::invalid_argument,
                      where + " is of run " + found.run_id + " with another configuration: " +
                        (diff.empty() ? "its hash " + found.config_hash + " is not " + ours.config_hash : diff) +
                        " (resume with the flags it was started with, or start afresh)");
  }
  return {};
}

caf::expected<run_identity> starting_identity(const job_config& cfg, const snapshot_store& store) {
  run_identity ours;
  ours.config = run_configuration(cfg);
  ours.config_hash = sha256_hex(ours.config);
  if (!cfg.checkpoints.resume) {
    ours.run_id = new_run_id();
    if (ours.run_id.empty())
      return make_error(errc::io_error, "no randomness for a run id (OpenSSL's RAND_bytes failed)");
    return ours;
  }
  auto ids = store.committed();
  if (!ids)
    return std::move(ids.error());
  // Every readable manifest's run, newest first; damaged ones are left to
  // the resume's validation, which skips them.
  std::map<std::string, std::vector<uint64_t>> runs;
  const checkpoint_manifest* newest = nullptr;
  std::vector<checkpoint_manifest> manifests;
  for (auto it = ids->rbegin(); it != ids->rend(); ++it)
    if (auto m = store.manifest(*it))
      manifests.push_back(std::move(*m));
  for (auto& m : manifests) {
    runs[m.run.run_id].push_back(m.checkpoint);
    if (!newest)
      newest = &m;
  }
  auto dir = cfg.checkpoints.dir.string();
  if (runs.size() > 1) {
    std::string which;
    for (auto& [run, cps] : runs)
      which += (which.empty() ? "" : "; ") + std::string(run.empty() ? "no run id" : "run " + run) +
               ": checkpoint" + (cps.size() > 1 ? "s " : " ") + std::to_string(cps.back()) +
               (cps.size() > 1 ? ".." + std::to_string(cps.front()) : "");
    return make_error(errc::invalid_argument, "cannot resume: checkpoint directory " + dir +
                                                " holds checkpoints of more than one run (" + which +
                                                "); keel inspect " + dir + " shows which files are whose");
  }
  if (!newest)
    return ours;  // nothing readable: the resume's validation says why
  ours.run_id = newest->run.run_id;
  if (auto err = check_same_run(ours, newest->run,
                                "cannot resume: checkpoint " + std::to_string(newest->checkpoint) + " in " + dir))
    return err;
  return ours;
}

}  // namespace keel
