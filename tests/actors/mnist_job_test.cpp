// keel trains real MNIST models through kills. The CI tier uses a subset
// and a short run; the slow tier (mnist_job_slow_test.cpp) the full data
// and the targets.
#include "job_fixture.hpp"
#include "models/mnist_data.hpp"
#include "models/plain_trainer.hpp"

using namespace keel;
using namespace keel::test;

namespace {

std::shared_ptr<const model> mnist(const std::string& name, uint64_t train, uint64_t test) {
  model_options mo;
  mo.data_dir = default_data_dir();
  mo.mnist_limits.train = train;
  mo.mnist_limits.test = test;
  auto m = make_model(name, mo);
  REQUIRE_MESSAGE(m, describe(m.error()));
  return *m;
}

}  // namespace

TEST_CASE("MNIST softmax on a 6000-image subset learns through shard, worker and checkpointer kills") {
  for (auto rule : {consistency_kind::bsp, consistency_kind::asp}) {
    CAPTURE(static_cast<int>(rule));
    temp_dir dir;
    auto c = config_for(mnist("mnist-softmax", 6000, 2000), dir, 3 * 93);  // 3 epochs
    c.training.optimizer.lr = 0.05f;
    c.training.rule.kind = rule;
    c.checkpoints.every = 25;
    c.faults.plan = {kill_at("shard:0", 60), kill_at("worker:1", 120), kill_at("checkpointer", 150),
                kill_at("shard:1", 200)};
    auto r = run(c);
    REQUIRE_MESSAGE(r, describe(r.error()));
    REQUIRE(r->quality.accuracy);
    // Plain SGD reaches about 0.87 on this subset in 3 epochs.
    CHECK(*r->quality.accuracy >= 0.85);
    CHECK(r->pushes_applied == r->pushes_acked);
    CHECK(r->restarts.size() >= 2);
  }
}

// The README's headline, sized for CI: the MNIST MLP on the whole data set,
// 2 epochs of keel train's defaults (BSP, 2 shards, 2 workers, batch 32,
// SGD lr 0.1) through kills of every kind of actor, reaches the accuracy
// the plain single-thread loop reaches in 2 epochs. The slow tier
// (mnist_job_slow_test.cpp) trains to the full targets.
TEST_CASE("the MNIST MLP trained 2 epochs through kills reaches the plain single-thread loop's 2-epoch accuracy") {
  auto m = mnist("mnist-mlp", 0, 0);
  plain_trainer_config pc;
  pc.lr = 0.1f;
  pc.batch_size = 32;
  pc.epochs = 2;
  auto plain = train_plain(*m, pc);
  REQUIRE_MESSAGE(plain, describe(plain.error()));
  REQUIRE(plain->final_test.accuracy);

  temp_dir dir;
  auto steps = 2 * steps_per_epoch(m->num_train_examples(), 2, 32);
  auto c = config_for(m, dir, steps);
  c.training.optimizer.lr = 0.1f;
  c.training.batch_size = 32;
  c.checkpoints.every = 50;
  c.faults.plan = {kill_at("shard:0", steps / 6),      kill_at("worker:1", 2 * steps / 6),
              kill_at("checkpointer", 3 * steps / 6), kill_at("shards", 4 * steps / 6),
              kill_at("workers", 5 * steps / 6)};
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  REQUIRE(r->quality.accuracy);
  MESSAGE("2 epochs: keel through " << r->faults_injected << " kills " << *r->quality.accuracy
                                    << ", plain loop " << *plain->final_test.accuracy);
  check_faults_fired(c, *r);
  CHECK(count(*r, event_kind::restart) + r->rollbacks >= c.faults.plan.size());
  CHECK(r->pushes_applied == r->pushes_acked);
  CHECK(*r->quality.accuracy >= *plain->final_test.accuracy - 0.005);
}

// The progress line scores the parameters every shard holds at that moment:
// from chance at the start to near the final accuracy at the end. (It once
// scored a read-out that stopped after the first shard, and printed 0.098
// all the way through.)
TEST_CASE("progress events score the held-out set with every shard's parameters, and accuracy rises") {
  temp_dir dir;
  auto c = config_for(mnist("mnist-softmax", 6000, 2000), dir, 2 * 93);  // 2 epochs
  c.training.optimizer.lr = 0.05f;
  c.checkpoints.every = 25;
  c.progress.every = 31;
  c.progress.accuracy = true;
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  std::vector<double> accuracy;
  std::vector<uint64_t> steps;
  for (auto& e : r->events)
    if (e.kind == event_kind::progress) {
      CHECK_MESSAGE(!std::isnan(e.accuracy), e.detail);
      CHECK(e.loss > 0);
      CHECK(e.samples_per_second > 0);
      accuracy.push_back(e.accuracy);
      steps.push_back(e.step);
    }
  // Every multiple of the interval, the last step's included: workers of a
  // job without faults report their step only every 8th step (and the
  // last), which must not skip a progress point.
  CHECK(steps == std::vector<uint64_t>{31, 62, 93, 124, 155, 186});
  REQUIRE(accuracy.size() >= 5);
  CHECK(accuracy.front() < accuracy.back());
  CHECK(accuracy.back() >= 0.8);
  // The last progress line scores nearly what the final read-out does.
  CHECK(std::abs(accuracy.back() - *r->quality.accuracy) < 0.05);
  // Most lines improve on the first: not a flat line at chance.
  CHECK(std::count_if(accuracy.begin(), accuracy.end(), [&](double a) { return a > 0.5; }) >=
        static_cast<long>(accuracy.size()) - 1);
}
