#pragma once
// The probe model checks exactly-once delivery, not learning: every gradient
// it computes is -1/lr for every dense key and every sparse key it asks for,
// and each batch asks for all of its sparse keys. A shard that applies each
// acknowledged push once with plain SGD at learning rate `lr`
// (w -= lr * g, so w += 1 exactly when lr is a power of two, 1 by default)
// ends with every parameter equal to the number of pushes it applied; after
// any faults, check() compares that with the count of acknowledged pushes.
// In BSP, where a shard sums a step's gradients over W workers before one
// apply, a step adds W: still one per acknowledged push. Other optimizers
// (momentum, AdaGrad, Adam) rescale the step and void the property. Values
// stay exact integers up to 2^24 pushes. Registry name "probe"; immutable
// and thread-safe per the model contract.
//
// With probe_config::table_keys > 0 the probe also has an embedding table
// "probe.table" of rows of table_dim floats: each batch touches up to
// table_keys rows (a pure function of the batch's examples, so of (seed,
// epoch, step, worker)), their keys drawn from a pool of table_pool keys
// spread over the 64-bit space, so rows repeat across batches; the gradient
// of every touched row is -1/lr in every element. A row starts at small
// integers drawn from (seed, key) and each push that touches it adds exactly
// 1 to every element: after a run, row = initial_rows + the number of pushes
// that touched it, and table_touches() counts those from the schedule alone.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "models/model.hpp"
#include "models/model_configs.hpp"

namespace keel {


class probe_model final : public model {
 public:
  static constexpr uint32_t table_dim = 4;
  static constexpr const char* table_name = "probe.table";

  // Fails with invalid_argument unless dense_keys >= 1 and lr is a positive
  // power of two (so that -1/lr times lr is exactly -1).
  static caf::expected<std::shared_ptr<const probe_model>> make(const probe_config& c);

  std::string name() const override { return "probe"; }
  const parameter_layout& layout() const override { return layout_; }
  uint64_t num_train_examples() const override { return config_.examples; }
  uint64_t num_test_examples() const override { return 0; }
  // No bound: the probe's property is check(), not a quality.
  quality_target target() const override;
  // Every parameter starts at 0.
  void initial_dense(uint64_t seed, uint64_t first_key, span<float> out) const override;
  std::unique_ptr<model_scratch> make_scratch() const override;

  // Ok if every parameter (dense and sparse) equals `acknowledged_pushes`;
  // else an invalid_argument error naming the first key that differs, its
  // value and the expected one.
  caf::error check(const full_parameters& params, uint64_t acknowledged_pushes) const;
  // The same where the count may differ by key: `acknowledged(k)` for the
  // shard of global key k (dense keys first, then the sparse ones).
  caf::error check(const full_parameters& params, const std::function<uint64_t(uint64_t)>& acknowledged) const;

  // True when the probe has its table (probe_config::table_keys > 0).
  bool has_table() const { return config_.table_keys > 0; }

  // For each row the schedule touches, how many batches touch it: the
  // batches of `workers` workers over global steps [0, steps) each, with
  // `seed` and `batch_size` (batch_schedule.hpp). With every push applied
  // exactly once, a row ends at initial + this count (in BSP too: a step
  // sums one -1 per worker that touched the row). Empty without a table;
  // errors as batch_indices gives them (e.g. a batch larger than a
  // worker's share).
  caf::expected<std::map<uint64_t, uint64_t>> table_touches(uint64_t seed, uint32_t workers,
                                                            uint32_t batch_size,
                                                            uint64_t steps) const;

  explicit probe_model(const probe_config& c);  // use make(); public for make_shared

 protected:
  caf::error do_sparse_keys(span<const uint64_t> batch, model_scratch& scratch,
                            std::vector<uint64_t>& keys) const override;
  // loss is the probe's objective -(sum of the pulled parameters) / lr, whose
  // gradient is the constant above; it is not a log loss.
  caf::error do_gradient(span<const uint64_t> batch, const parameter_view& params,
                         model_scratch& scratch, gradient_buffer& out) const override;
  // Reports the objective over all parameters as the metric "objective";
  // no log loss, no accuracy.
  caf::expected<evaluation> do_evaluate(const full_parameters& params,
                                        model_scratch& scratch) const override;
  // Row element j: the 4 bits (4j, 4j+4] of a hash of (seed, key), 0..15.
  void do_initial_rows(uint64_t seed, uint32_t table, span<const uint64_t> keys,
                       span<float> out) const override;
  caf::error do_table_keys(span<const uint64_t> batch, model_scratch& scratch,
                           table_key_lists& keys) const override;

 private:
  probe_config config_;
  parameter_layout layout_;
};

}  // namespace keel
