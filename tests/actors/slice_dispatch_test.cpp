// dispatch_slices (actors/job/slice_dispatch.hpp) against stand-in scorers
// that answer as a worker does, die while scoring, never answer, or answer
// another slice: every evaluation, whoever ends up scoring which slice,
// equals the whole set's evaluation scored slice by slice in one place, bit
// for bit, and each failure names the worker and the slice.
#include <chrono>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include "actors/core/atoms.hpp"
#include "actors/core/slice_wire.hpp"
#include "actors/job/slice_dispatch.hpp"
#include "messages/errors.hpp"
#include "models/model_registry.hpp"

using namespace keel;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t seed = 7;

std::shared_ptr<const model> small_ctr() {
  model_options mo;
  mo.ctr.vocabulary = 50'000;
  mo.ctr.train_examples = 4096;
  mo.ctr.test_examples = 10'000;  // three slices, the last partial
  auto m = make_model("ctr-lr", mo);
  REQUIRE_MESSAGE(m, describe(m.error()));
  return *m;
}

std::vector<float> dense_of(const model& m) {
  std::vector<float> d(m.layout().dense_size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = 0.01f * static_cast<float>(i) - 0.05f;
  return d;
}

// A slice scored with the model's initial rows, as a worker scores it with
// the rows it pulled.
caf::expected<partial_evaluation> score_directly(const model& m, test_slice s, const std::vector<float>& dense) {
  auto scratch = m.make_scratch();
  std::vector<uint64_t> sparse;
  table_key_lists keys;
  if (auto err = m.test_keys(s, *scratch, sparse, keys))
    return err;
  std::vector<std::vector<float>> rows(keys.size());
  std::vector<table_rows> views;
  for (uint32_t t = 0; t < keys.size(); ++t) {
    rows[t].resize(keys[t].size() * m.layout().tables()[t].dim);
    if (auto err = m.initial_rows(seed, t, keys[t], rows[t]))
      return err;
    views.push_back({keys[t], rows[t]});
  }
  return m.evaluate_slice(s, {dense, {}, {}, views}, *scratch);
}

evaluation reference(const model& m, const std::vector<float>& dense) {
  partial_evaluation all;
  for (auto s : cut_slices(m.num_test_examples(), slice_examples)) {
    auto part = score_directly(m, s, dense);
    REQUIRE_MESSAGE(part, describe(part.error()));
    all.merge(*part);
  }
  return all.result();
}

void check_same(const evaluation& a, const evaluation& b) {
  CHECK(a.examples == b.examples);
  REQUIRE(a.log_loss);
  REQUIRE(b.log_loss);
  CHECK(*a.log_loss == *b.log_loss);
  CHECK(a.accuracy == b.accuracy);
  CHECK(*a.metric("auc") == *b.metric("auc"));
  CHECK(*a.metric("auc_tie_bound") == *b.metric("auc_tie_bound"));
}

caf::behavior answering(caf::event_based_actor*, std::shared_ptr<const model> m) {
  return {[m](score_atom, const slice_task& t) -> caf::result<slice_score> {
    auto part = score_directly(*m, {t.first, t.count}, t.dense);
    if (!part)
      return part.error();
    return to_wire({t.first, t.count}, *part);
  }};
}

// Dies with the slice in hand, as a worker killed while scoring.
caf::behavior dying(caf::event_based_actor* self) {
  return {[self](score_atom, const slice_task&) { self->quit(caf::exit_reason::kill); }};
}

// Takes the slice and never answers.
caf::behavior silent(caf::event_based_actor* self) {
  return {[self](score_atom, const slice_task&) {
    return self->make_response_promise<slice_score>();
  }};
}

// Answers with the score of the slice after the one asked.
caf::behavior confused(caf::event_based_actor*, std::shared_ptr<const model> m) {
  return {[m](score_atom, const slice_task& t) -> caf::result<slice_score> {
    test_slice other{t.first == 0 ? slice_examples : 0, slice_examples};
    auto part = score_directly(*m, other, t.dense);
    if (!part)
      return part.error();
    return to_wire(other, *part);
  }};
}

struct outcome {
  caf::expected<evaluation> quality = evaluation{};
  std::vector<std::string> scored_by;   // per merged slice
  std::vector<std::string> reassigned;  // on_reassign's reasons
};

// Runs dispatch_slices on an actor of its own; the caller scores with the
// initial rows too (or fails when `here_fails`).
outcome dispatch(caf::actor_system& sys, std::shared_ptr<const model> m, std::vector<slice_scorer> workers,
                 std::chrono::milliseconds deadline, bool here_fails = false) {
  caf::scoped_actor self{sys};
  auto dense = dense_of(*m);
  slice_plan plan;
  plan.examples = m->num_test_examples();
  plan.dense = dense;
  plan.workers = std::move(workers);
  plan.deadline = deadline;
  plan.score_here = [m, dense, here_fails](test_slice s, slice_done cb) {
    if (here_fails)
      return cb(make_error(errc::not_found, "shard 1 is not up"));
    cb(score_directly(*m, s, dense));
  };
  auto out = std::make_shared<outcome>();
  plan.on_reassign = [out](const std::string& why) { out->reassigned.push_back(why); };
  plan.on_scored = [out](const std::string& by) { out->scored_by.push_back(by.empty() ? "here" : by); };
  caf::actor report_to = self;
  sys.spawn([plan, report_to, out](caf::event_based_actor* driver) mutable {
    dispatch_slices(driver, std::move(plan), [driver, report_to, out](caf::expected<evaluation> q) {
      out->quality = std::move(q);
      driver->send(report_to, done_atom::value);
      driver->quit();
    });
  });
  bool done = false;
  self->receive([&](done_atom) { done = true; }, caf::after(120s) >> [] {});
  REQUIRE(done);
  return *out;
}

size_t count_of(const std::vector<std::string>& v, const std::string& x) {
  return static_cast<size_t>(std::count(v.begin(), v.end(), x));
}

}  // namespace

TEST_CASE("slices scored by workers merge to the evaluation of the whole set, bit for bit") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto m = small_ctr();
  auto expected = reference(*m, dense_of(*m));
  CHECK(expected.examples == 10'000);
  auto a = sys.spawn(answering, m), b = sys.spawn(answering, m);
  auto out = dispatch(sys, m, {{"worker:0", a}, {"worker:1", b}}, 60s);
  REQUIRE_MESSAGE(out.quality, describe(out.quality.error()));
  check_same(*out.quality, expected);
  CHECK(out.scored_by.size() == 3);
  CHECK(count_of(out.scored_by, "here") == 0);
  CHECK(out.reassigned.empty());
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
}

TEST_CASE("a worker killed while scoring loses its slice to another worker, and the evaluation is equal") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto m = small_ctr();
  auto killed = sys.spawn(dying);
  auto a = sys.spawn(answering, m);
  auto out = dispatch(sys, m, {{"worker:0", killed}, {"worker:1", a}}, 60s);
  REQUIRE_MESSAGE(out.quality, describe(out.quality.error()));
  check_same(*out.quality, reference(*m, dense_of(*m)));
  CHECK(count_of(out.scored_by, "worker:1") == 3);
  REQUIRE(!out.reassigned.empty());
  CHECK(out.reassigned[0].find("worker:0") != std::string::npos);
  CHECK(out.reassigned[0].find("slice [") != std::string::npos);
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE("with every worker dead, silent or wrong the coordinator scores the slices itself, and the evaluation is equal") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto m = small_ctr();
  auto killed = sys.spawn(dying), mute = sys.spawn(silent), wrong = sys.spawn(confused, m);
  auto out = dispatch(sys, m, {{"worker:0", killed}, {"worker:1", mute}, {"worker:2", wrong}}, 300ms);
  REQUIRE_MESSAGE(out.quality, describe(out.quality.error()));
  check_same(*out.quality, reference(*m, dense_of(*m)));
  CHECK(out.scored_by.size() == 3);
  CHECK(count_of(out.scored_by, "here") == 3);
  bool wrong_named = false;
  for (auto& why : out.reassigned)
    wrong_named = wrong_named || (why.find("worker:2") != std::string::npos && why.find("answers slice") != std::string::npos);
  CHECK(wrong_named);
  caf::anon_send_exit(mute, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(wrong, caf::exit_reason::user_shutdown);
}

TEST_CASE("without workers the caller scores every slice, and its failure ends the evaluation naming the slice") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto m = small_ctr();
  auto out = dispatch(sys, m, {}, 300ms);
  REQUIRE_MESSAGE(out.quality, describe(out.quality.error()));
  check_same(*out.quality, reference(*m, dense_of(*m)));
  CHECK(count_of(out.scored_by, "here") == 3);
  auto failed = dispatch(sys, m, {}, 300ms, true);
  REQUIRE(!failed.quality);
  CHECK(describe(failed.quality.error()).find("slice [0, 4096)") != std::string::npos);
  CHECK(describe(failed.quality.error()).find("shard 1 is not up") != std::string::npos);
}

TEST_CASE("slices cut a set in order, the last one short") {
  auto s = cut_slices(10'000, 4096);
  REQUIRE(s.size() == 3);
  CHECK(s[2].first == 8192);
  CHECK(s[2].count == 1808);
  CHECK(cut_slices(0, 4096).empty());
}
