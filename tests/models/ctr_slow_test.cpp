// The plain trainer's reference figures for the click-log models on the
// default ctr_config (models/plain_trainer.hpp, ctr_model::target()): a
// minute or two, so in the slow tier (`ctest -R '(slow)'`).
#include <doctest/doctest.h>

#include "models/ctr_model.hpp"
#include "models/plain_trainer.hpp"
#include "test_support.hpp"

using namespace keel;

TEST_CASE("the plain trainer reaches the CTR models' reference figures on the default click log") {
  for (uint32_t factors : {0u, ctr_config{}.fm_factors}) {
    auto m = ctr_model::make(ctr_config{}, factors);
    REQUIRE_MESSAGE(m, keel::test::error_text(m));
    plain_trainer_config pc;
    pc.batch_size = ctr_plain_batch;
    pc.lr = ctr_plain_lr(factors);
    pc.optimizer = plain_optimizer::adagrad;
    auto r = train_plain(**m, pc);
    REQUIRE_MESSAGE(r, keel::test::error_text(r));
    const auto target = (*m)->target();
    MESSAGE((*m)->name() << ": log loss " << *r->final_test.log_loss << ", AUC "
                         << *r->final_test.metric("auc") << ", " << r->examples_per_second
                         << " examples/s; target: " << target.basis);
    CHECK(meets(r->final_test, target));
    CHECK(*r->final_test.log_loss == doctest::Approx(*target.max_log_loss / 1.005).epsilon(1e-3));
    CHECK(*r->final_test.log_loss > *(*m)->planted().log_loss);
  }
}
