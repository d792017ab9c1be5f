// The worker actor against a real shard actor (or stand-ins for one) and a
// directory: what a worker resends to a restarted shard when the link loses
// part of it; whose status answer decides where a restarted worker resumes.
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include "actors/core/atoms.hpp"
#include "actors/core/job_event.hpp"
#include "actors/core/partition.hpp"
#include "actors/faults/link_faults.hpp"
#include "actors/ps/parameter_shard.hpp"
#include "actors/ps/worker.hpp"
#include "messages/decode.hpp"
#include "messages/register_types.hpp"
#include "models/probe_model.hpp"
#include "supervision/directory.hpp"
#include "supervision/protocol.hpp"

using namespace keel;
using namespace std::chrono_literals;

namespace {

struct replay_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> job;  // the worker's job: events, steps
  caf::actor directory;
  std::shared_ptr<link_faults> links = std::make_shared<link_faults>();
  std::shared_ptr<const model> probe;
  std::vector<shard_keys> parts;

  replay_fixture() {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    job = std::make_unique<caf::scoped_actor>(*sys);
    directory = supervision::spawn_directory(*sys);
    auto m = probe_model::make({});
    REQUIRE(m);
    probe = *m;
    parts = partition_keys(probe->layout().dense_size(), probe->layout().sparse_key_count(), 1);
  }
  ~replay_fixture() {
    caf::anon_send_exit(directory, caf::exit_reason::user_shutdown);
  }

  // A fresh BSP shard:0 of a job of two workers, registered as incarnation `inc`.
  caf::actor start_shard(uint64_t inc) {
    parameter_shard_config o;
    o.core.shard = 0;
    o.core.num_workers = 2;
    o.core.dense = parts[0].dense;
    o.core.sparse = parts[0].sparse;
    o.core.rule = {consistency_kind::bsp, 0};
    o.core.optimizer.lr = 1.0f;
    o.initial_dense.resize(parts[0].dense.size());
    probe->initial_dense(1, parts[0].dense.begin, o.initial_dense);
    parameter_shard_env env;
    env.faults = links;
    auto s = spawn_parameter_shard(*sys, std::move(o), env);
    REQUIRE(s);
    register_shard(*s, inc);
    return *s;
  }

  void register_shard(const caf::actor& s, uint64_t inc) {
    (*job)->send(directory, supervision::register_atom::value,
                 supervision::directory_update{"shard:0", inc, supervision::name_state::up, s});
  }

  caf::actor start_worker0(std::chrono::milliseconds request_timeout = 300ms) {
    worker_config o;
    o.core.worker = 0;
    o.core.parts = parts;
    o.core.shard_names = {"shard:0"};
    o.core.total_steps = 10;
    o.core.rule = consistency_kind::bsp;
    o.num_workers = 2;
    o.directory = directory;
    o.job = caf::actor_cast<caf::actor>(*job);
    o.batch_size = 16;
    o.request_timeout = request_timeout;
    worker_env env;
    env.training_model = probe;
    env.faults = links;
    auto w = spawn_worker(*sys, o, env);
    REQUIRE(w);
    return *w;
  }

  // Waits until the worker reports step `step` done.
  bool step_done(uint64_t step, std::chrono::seconds within) {
    auto deadline = std::chrono::steady_clock::now() + within;
    bool seen = false;
    while (!seen && std::chrono::steady_clock::now() < deadline)
      (*job)->receive(
        [&](const step_report& r) { seen = r.step >= step; },
        [](const job_event&) {},
        caf::after(std::chrono::milliseconds(100)) >> [] {});
    return seen;
  }

  // What `shard` has received of worker 0.
  uint64_t received(const caf::actor& shard) {
    uint64_t out = 0;
    (*job)->request(shard, 5s, status_atom::value, uint32_t{0})
      .receive([&](uint64_t r, uint64_t, uint64_t, uint64_t) { out = r; },
               [&](caf::error& e) { FAIL(describe(e)); });
    return out;
  }

  // Waits until `shard` has received push `seq` of worker 0.
  bool received_by(const caf::actor& shard, uint64_t seq, std::chrono::seconds within) {
    auto deadline = std::chrono::steady_clock::now() + within;
    for (;;) {
      if (received(shard) >= seq)
        return true;
      if (std::chrono::steady_clock::now() >= deadline)
        return false;
      (*job)->receive([](const job_event&) {}, [](const step_report&) {},
                      caf::after(std::chrono::milliseconds(20)) >> [] {});
    }
  }
};

using answer_atom = caf::atom_constant<caf::atom("answer")>;
using asked_atom = caf::atom_constant<caf::atom("asked")>;
using pulled_atom = caf::atom_constant<caf::atom("pulled")>;

// A stand-in for one incarnation of shard:0: it tells `test` of each status
// request and holds it until told what to answer (answer_atom, then ok), and
// tells `test` the clock of each pull, which it never answers.
struct stand_in_state {
  std::vector<caf::typed_response_promise<uint64_t, uint64_t, uint64_t, uint64_t>> status;
  std::vector<caf::typed_response_promise<pull_reply_msg>> pulls;
};

caf::behavior stand_in(caf::stateful_actor<stand_in_state>* self, caf::actor test) {
  return {
    [=](status_atom, uint32_t) -> caf::result<uint64_t, uint64_t, uint64_t, uint64_t> {
      auto rp = self->make_response_promise<uint64_t, uint64_t, uint64_t, uint64_t>();
      self->state.status.push_back(rp);
      self->send(test, asked_atom::value, caf::actor_cast<caf::actor>(self));
      return rp;
    },
    [=](answer_atom, uint64_t received) {
      for (auto& rp : self->state.status) rp.deliver(received, uint64_t{0}, uint64_t{0}, uint64_t{0});
      self->state.status.clear();
      return caf::ok_atom::value;
    },
    [=](const pull_request_msg& m) -> caf::result<pull_reply_msg> {
      auto d = decode(m);
      self->send(test, pulled_atom::value, caf::actor_cast<caf::actor>(self),
                 d ? d->root().getClock() : ~uint64_t{0});
      auto rp = self->make_response_promise<pull_reply_msg>();
      self->state.pulls.push_back(rp);
      return rp;
    },
  };
}

}  // namespace

TEST_CASE("a replayed push the link loses is sent again, so the restarted BSP shard serves the parked pull") {
  replay_fixture f;
  auto a = f.start_shard(1);
  auto w = f.start_worker0();
  // Worker 1 never pushes: worker 0 pushes step 0 (held by the shard) and
  // then waits in step 1's pull, whatever the timing.
  REQUIRE(f.step_done(1, 10s));
  REQUIRE(f.received(a) == 1);
  // The next push on any link, the replay of push 1 to the new incarnation,
  // is lost; the fault is armed on the shard's thread as it counts the push.
  auto next = f.links->count(msg_kind::push) + 1;
  f.links->at_count(msg_kind::push, next, [links = f.links] {
    fault drop;
    drop.kind = fault_kind::drop;
    drop.target = "worker:0>shard:0";
    drop.count = 1;
    links->arm(drop);  // a valid target: checked below through hits()
  });
  caf::anon_send_exit(a, caf::exit_reason::kill);
  auto b = f.start_shard(2);  // restarted from nothing: it needs push 1 again
  // Without a resend the shard would wait for push 1 forever, and with it
  // worker 0's step-1 pull.
  CHECK(f.received_by(b, 1, 10s));
  CHECK(f.links->hits().dropped == 1);  // the replayed push was lost once
  CHECK(f.links->count(msg_kind::push) >= next + 1);
  caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
}

// Found in the chaos tier: a restarted worker asked shard:0 its status just
// as shard:0 restarted from an older checkpoint. The old incarnation's
// answer (it held worker 0's pushes to 5) arriving after the new one was
// named must not count; the new one, restored to 0, decides. Had the old
// answer counted, the worker would resume at step 5, which the new
// incarnation (lacking pushes 1..5, which no log holds) never serves.
TEST_CASE("a status answer from a replaced shard incarnation does not decide where a restarted worker resumes") {
  replay_fixture f;
  caf::scoped_actor test{*f.sys};
  auto old_shard = f.sys->spawn(stand_in, caf::actor{test});
  auto new_shard = f.sys->spawn(stand_in, caf::actor{test});
  auto asked = [&](const caf::actor& who) {
    bool seen = false;
    test->receive([&](asked_atom, const caf::actor& from) { seen = from == who; },
                  caf::after(10s) >> [] {});
    return seen;
  };
  auto answer = [&](const caf::actor& who, uint64_t received) {
    bool ok = false;
    test->request(who, 5s, answer_atom::value, received)
      .receive([&](caf::ok_atom) { ok = true; }, [](caf::error&) {});
    return ok;  // delivered: in the worker's mailbox before what is sent next
  };
  f.register_shard(old_shard, 1);
  auto w = f.start_worker0(10s);  // no retry muddles the order below
  REQUIRE(asked(old_shard));
  f.register_shard(new_shard, 2);
  REQUIRE(asked(new_shard));
  REQUIRE(answer(old_shard, 5));
  REQUIRE(answer(new_shard, 0));
  uint64_t clock = ~uint64_t{0};
  caf::actor pulled;
  test->receive([&](pulled_atom, const caf::actor& from, uint64_t c) { pulled = from, clock = c; },
                caf::after(10s) >> [] {});
  CHECK(pulled == new_shard);
  CHECK(clock == 0);  // the step the new incarnation holds nothing of
  for (auto& a : {w, old_shard, new_shard}) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}
