// The NaN guard on the real path: a worker whose gradient is not finite
// skips the step and reports it, pushes nothing of it, and training goes on.
#include <atomic>
#include <cmath>
#include <limits>

#include "job_fixture.hpp"

using namespace keel;
using namespace keel::test;

namespace {

// The probe, except that one gradient, the first computed once the
// parameters have reached 7 (after 7 steps), is NaN.
class poisoned_probe final : public model {
 public:
  explicit poisoned_probe(std::shared_ptr<const model> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return "poisoned-probe"; }
  const parameter_layout& layout() const override { return inner_->layout(); }
  uint64_t num_train_examples() const override { return inner_->num_train_examples(); }
  uint64_t num_test_examples() const override { return 0; }
  quality_target target() const override { return {}; }
  void initial_dense(uint64_t seed, uint64_t first, span<float> out) const override {
    inner_->initial_dense(seed, first, out);
  }
  std::unique_ptr<model_scratch> make_scratch() const override { return inner_->make_scratch(); }

 protected:
  caf::error do_sparse_keys(span<const uint64_t> batch, model_scratch& s,
                            std::vector<uint64_t>& keys) const override {
    return inner_->sparse_keys(batch, s, keys);
  }
  caf::error do_gradient(span<const uint64_t> batch, const parameter_view& p, model_scratch& s,
                         gradient_buffer& out) const override {
    if (auto err = inner_->gradient(batch, p, s, out))
      return err;
    // With one worker the probe's parameters count the steps applied.
    if (p.dense[0] == 7.0f && !poisoned_.exchange(true))
      out.dense[3] = std::numeric_limits<float>::quiet_NaN();
    return {};
  }
  caf::expected<evaluation> do_evaluate(const full_parameters&, model_scratch&) const override {
    return evaluation{};
  }

 private:
  std::shared_ptr<const model> inner_;
  mutable std::atomic<bool> poisoned_{false};
};

}  // namespace

TEST_CASE("a step whose gradient is not finite is skipped and reported, and training goes on") {
  temp_dir dir;
  auto c = config_for(std::make_shared<poisoned_probe>(probe()), dir, 20);
  c.training.workers = 1;
  c.training.batch_size = 16;
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  CHECK(count(*r, event_kind::skipped_step) == 1);
  CHECK(r->steps == 20);
  // 20 pushes per shard were acknowledged, but the skipped one carried nothing.
  CHECK(r->pushes_acked == 2 * 20);
  for (auto v : r->dense)
    CHECK(v == 19.0f);
}
