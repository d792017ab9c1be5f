// An application's own training loop through ps_client (actors/job/ps_client.hpp):
// each test runs one loop thread per worker that does what keel's worker
// would do (the batch of (seed, epoch, step, worker), its keys, the model's
// gradient), so a BSP run must end bit-identical to the same job trained by
// keel's own workers, through the kills the plan injects, and the additive
// probe must hold every push exactly once.
#include <doctest/doctest.h>

#include "tests/actors/job_fixture.hpp"
#include "tests/actors/model_loop.hpp"

namespace keel::test {
namespace {

void check_loops(const std::vector<loop_outcome>& loops) {
  for (size_t w = 0; w < loops.size(); ++w) {
    INFO("worker:" << w);
    CHECK_MESSAGE(!loops[w].error, describe(loops[w].error));
  }
}

}  // namespace

TEST_CASE("an application's own BSP loop through ps_clients ends bit-identical to keel's own workers") {
  for (auto m : {probe_with_table(), small_sparse_lr()}) {
    INFO(m->name());
    temp_dir a, b;
    auto ours = run(config_for(m, a, 40));
    REQUIRE_MESSAGE(ours, describe(ours.error()));
    std::vector<loop_outcome> loops;
    auto theirs = run_with_clients(config_for(m, b, 40), loops);
    REQUIRE_MESSAGE(theirs, describe(theirs.error()));
    check_loops(loops);
    CHECK(theirs->steps == 40);
    CHECK(loops[0].pushes == 40);
    CHECK(loops[1].pushes == 40);
    CHECK(theirs->params_sha256 == ours->params_sha256);
    CHECK(theirs->pushes_applied == theirs->pushes_acked);
  }
}

TEST_CASE("an application's loop loses no acknowledged push and applies none twice through shard and worker kills") {
  bool pipelined = false;
  SUBCASE("waiting for each answer") { pipelined = false; }
  SUBCASE("pipelined: the next step's pull asked behind each push") { pipelined = true; }
  temp_dir a, b;
  auto cfg = config_for(probe_with_table(), b, 60);
  auto plan = parse_fault_plan("kill:shard:0@12,kill:worker:1@25,kill:shard:1@37,exit:worker:0@44");
  REQUIRE_MESSAGE(plan, describe(plan.error()));
  cfg.faults.plan = *plan;
  std::vector<loop_outcome> loops;
  auto r = run_with_clients(cfg, loops, pipelined);
  REQUIRE_MESSAGE(r, describe(r.error()));
  check_loops(loops);
  check_faults_fired(cfg, *r);
  check_exactly_once(cfg, *r);
  CHECK(r->restarts["shard:0"] >= 1);
  CHECK(r->restarts["worker:1"] >= 1);
  auto clean = run(config_for(probe_with_table(), a, 60));
  REQUIRE_MESSAGE(clean, describe(clean.error()));
  CHECK(r->params_sha256 == clean->params_sha256);
}

TEST_CASE("an application's SSP and ASP loops apply every push exactly once through shard and worker kills") {
  consistency rule;
  SUBCASE("SSP, staleness 2") { rule = {consistency_kind::ssp, 2}; }
  SUBCASE("ASP") { rule = {consistency_kind::asp, 0}; }
  temp_dir dir;
  auto cfg = config_for(probe_with_table(), dir, 60);
  cfg.training.rule = rule;
  auto plan = parse_fault_plan("kill:shard:1@15,kill:worker:0@30,kill:shard:0@45");
  REQUIRE_MESSAGE(plan, describe(plan.error()));
  cfg.faults.plan = *plan;
  std::vector<loop_outcome> loops;
  auto r = run_with_clients(cfg, loops, true);
  REQUIRE_MESSAGE(r, describe(r.error()));
  check_loops(loops);
  check_faults_fired(cfg, *r);
  check_exactly_once(cfg, *r);  // each parameter counts its pushes, whatever their order
  CHECK(r->restarts["shard:1"] >= 1);
  CHECK(r->restarts["worker:0"] >= 1);
}

TEST_CASE("a push its worker's restart interrupted is pushed again by the next incarnation, once") {
  temp_dir a, b;
  auto cfg = config_for(probe_with_table(), b, 6);
  cfg.training.workers = 1;
  cfg.application_loop = true;
  auto j = job::start(cfg);
  REQUIRE_MESSAGE(j, describe(j.error()));
  auto c = (*j)->client(0);
  REQUIRE(c);
  app_model app(cfg, 0);
  for (uint64_t s = 0; s < 3; ++s) {
    auto at = c->next_step().wait(patience);
    REQUIRE_MESSAGE(at, describe(at.error()));
    REQUIRE(*at == s);
    auto keys = app.keys_at(s);
    REQUIRE(keys);
    auto p = c->pull(s, *keys).wait(patience);
    REQUIRE_MESSAGE(p, describe(p.error()));
    auto g = app.gradient(*c, **p);
    REQUIRE(g);
    if (s == 2)  // the worker dies holding step 2's pull, before the push
      REQUIRE(!(*j)->kill("worker:0"));
    auto done = c->push(s, std::move(*g)).wait(patience);
    REQUIRE_MESSAGE(done, describe(done.error()));
    CHECK(*done == s);
  }
  auto rest = run_loop(*c, cfg);
  CHECK_MESSAGE(!rest.error, describe(rest.error));
  CHECK(rest.pushes == 3);
  auto r = (*j)->wait(std::chrono::minutes(2));
  REQUIRE_MESSAGE(r, describe(r.error()));
  CHECK(r->restarts["worker:0"] == 1);
  check_exactly_once(cfg, *r);
  auto clean_cfg = config_for(probe_with_table(), a, 6);
  clean_cfg.training.workers = 1;
  auto clean = run(clean_cfg);
  REQUIRE_MESSAGE(clean, describe(clean.error()));
  CHECK(r->params_sha256 == clean->params_sha256);
}

TEST_CASE("a ps_client refuses what its worker cannot do, naming it, and the job's end answers every open request") {
  temp_dir dir;
  auto cfg = config_for(probe_with_table(), dir, 5);
  SUBCASE("a job running its model's own loop has no clients") {
    auto j = job::start(cfg);
    REQUIRE(j);
    auto c = (*j)->client(0);
    REQUIRE(!c);
    CHECK(is(c.error(), errc::invalid_argument));
    CHECK(describe(c.error()).find("application_loop") != std::string::npos);
  }
  cfg.application_loop = true;
  auto j = job::start(cfg);
  REQUIRE_MESSAGE(j, describe(j.error()));
  SUBCASE("no such worker") {
    auto c = (*j)->client(2);
    REQUIRE(!c);
    CHECK(is(c.error(), errc::not_found));
  }
  SUBCASE("bad keys, a step the worker is not at, a push without its pull, a gradient of another shape") {
    auto c = (*j)->client(0);
    REQUIRE(c);
    auto s = c->next_step().wait(patience);
    REQUIRE(s);
    CHECK(*s == 0);
    auto unsorted = c->pull(0, {{}, {{5, 3}}}).wait(patience);
    REQUIRE(!unsorted);
    CHECK(is(unsorted.error(), errc::invalid_argument));
    CHECK(describe(unsorted.error()).find("ascending") != std::string::npos);
    auto ahead = c->pull(3, {}).wait(patience);
    REQUIRE(!ahead);
    CHECK(is(ahead.error(), errc::step_moved));
    CHECK(describe(ahead.error()).find("at step 0") != std::string::npos);
    auto early = c->push(0, {}).wait(patience);
    REQUIRE(!early);
    CHECK(describe(early.error()).find("without its pull") != std::string::npos);
    auto p = c->pull(0, {{}, {{3, 5}}}).wait(patience);
    REQUIRE_MESSAGE(p, describe(p.error()));
    CHECK((*p)->step == 0);
    CHECK((*p)->table_keys.at(0) == std::vector<uint64_t>{3, 5});
    auto dense = c->tensor(**p, "probe.dense");
    REQUIRE(dense);
    CHECK(dense->size() == (*p)->dense.size());
    auto missing = c->tensor(**p, "no-such-tensor");
    CHECK(!missing);
    auto g = c->gradient_for(**p);
    g.dense.pop_back();
    auto wrong = c->push(0, g).wait(patience);
    REQUIRE(!wrong);
    CHECK(is(wrong.error(), errc::invalid_argument));
    CHECK(describe(wrong.error()).find("dense values") != std::string::npos);
    // A push whose answer a callback takes: the step, once both shards acknowledged it.
    client_future<uint64_t> called;  // set by the callback, from keel's thread
    auto ok = c->push(0, c->gradient_for(**p));
    ok.then([called](const caf::expected<uint64_t>& a) { called.set(a); });
    // Worker 1 has not pushed step 0: under BSP the step is not applied,
    // but worker 0's push is acknowledged as soon as the shards hold it.
    auto acked = ok.wait(patience);
    REQUIRE_MESSAGE(acked, describe(acked.error()));
    CHECK(*acked == 0);
    auto seen = called.wait(patience);
    REQUIRE(seen);
    CHECK(*seen == 0);
    // A callback attached once the answer is there runs at once, here.
    uint64_t inline_seen = UINT64_MAX;
    ok.then([&](const caf::expected<uint64_t>& a) { inline_seen = a ? *a : UINT64_MAX - 1; });
    CHECK(inline_seen == 0);
    // Worker 0's pull of step 1 waits for worker 1's step 0: the job's
    // stop answers it.
    auto pending = c->pull(1, {});
    CHECK(!pending.ready());
    REQUIRE(!(*j)->stop());
    auto ended = pending.wait(patience);
    REQUIRE(!ended);
    CHECK(is(ended.error(), errc::shutting_down));
    auto after = c->next_step().wait(patience);
    REQUIRE(!after);
    CHECK(is(after.error(), errc::shutting_down));
  }
}

}  // namespace keel::test
