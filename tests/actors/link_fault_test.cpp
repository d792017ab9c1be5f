// Message faults on every link keel's messages travel (pushes, pulls and
// status requests; acks and pull replies; snapshots; directory updates),
// and faults that fire at a time or after a number of messages. Each job
// test checks that the fault really hit (the job's tally of messages
// dropped, duplicated, delayed and reordered, or its events) and that the
// probe's exactly-once property and BSP bit-identity survive it.
#include <algorithm>

#include "actors/faults/link_faults.hpp"
#include "job_fixture.hpp"

using namespace keel;
using namespace keel::test;

namespace {

fault one(const std::string& text) {
  auto plan = parse_fault_plan(text);
  REQUIRE_MESSAGE(plan, describe(plan.error()));
  REQUIRE(plan->size() == 1);
  return plan->front();
}

size_t count_events(const job_result& r, event_kind kind, const std::string& text = "") {
  return static_cast<size_t>(std::count_if(r.events.begin(), r.events.end(), [&](const job_event& e) {
    return e.kind == kind && e.detail.find(text) != std::string::npos;
  }));
}

job_config probe_job(const temp_dir& dir, const std::string& faults) {
  auto c = config_for(probe(), dir, 40);
  c.checkpoints.every = 8;
  c.recovery.request_timeout = std::chrono::milliseconds(150);
  c.checkpoints.timeout = std::chrono::milliseconds(300);
  auto plan = parse_fault_plan(faults);
  REQUIRE_MESSAGE(plan, describe(plan.error()));
  c.faults.plan = *plan;
  return c;
}

// The fault-free result of the same configuration, for bit-identity.
std::string reference_sha() {
  temp_dir clean;
  auto c = probe_job(clean, "");
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  return r->params_sha256;
}

}  // namespace

TEST_CASE("link_faults matches links, ends and wildcards, and uses each fault up") {
  link_faults lf;
  REQUIRE(!lf.arm(one("drop:shard:0>worker:1@1x2")));
  CHECK(lf.on_message("shard:0", "worker:0", msg_kind::ack).action == send_action::deliver);
  CHECK(lf.on_message("worker:1", "shard:0", msg_kind::push).action == send_action::deliver);
  CHECK(lf.on_message("shard:0", "worker:1", msg_kind::ack).action == send_action::drop);
  CHECK(lf.on_message("shard:0", "worker:1", msg_kind::reply).action == send_action::drop);
  CHECK(lf.on_message("shard:0", "worker:1", msg_kind::ack).action == send_action::deliver);
  CHECK(lf.pending() == 0);

  // One actor's name covers both directions of all its links.
  REQUIRE(!lf.arm(one("dup:worker:1@1x2")));
  CHECK(lf.on_message("worker:1", "shard:1", msg_kind::pull).action == send_action::duplicate);
  CHECK(lf.on_message("directory", "worker:1", msg_kind::update).action == send_action::duplicate);
  CHECK(lf.pending() == 0);

  // "*" stands for either end; a delay carries its length.
  REQUIRE(!lf.arm(one("delay:*>checkpointer@1+7ms")));
  CHECK(lf.on_message("shard:0", "worker:0", msg_kind::ack).action == send_action::deliver);
  auto d = lf.on_message("shard:1", "checkpointer", msg_kind::snapshot);
  CHECK(d.action == send_action::delay);
  CHECK(d.delay_ms == 7);

  REQUIRE(!lf.arm(one("reorder:worker:0>shard:0@1")));
  CHECK(lf.on_message("worker:0", "shard:0", msg_kind::push).action == send_action::reorder);
  CHECK(lf.hits() == message_fault_hits{2, 2, 1, 1});

  auto refused = lf.arm(one("kill:shard:0@1"));
  CHECK(refused);
}

TEST_CASE("link_faults counts messages by kind and fires a count trigger once") {
  link_faults lf;
  int fired = 0;
  lf.at_count(msg_kind::push, 3, [&] { ++fired; });
  for (int i = 0; i < 5; ++i) lf.on_message("worker:0", "shard:0", msg_kind::push);
  lf.on_message("shard:0", "worker:0", msg_kind::ack);
  CHECK(fired == 1);
  CHECK(lf.count(msg_kind::push) == 5);
  CHECK(lf.count(msg_kind::ack) == 1);
  lf.at_count(msg_kind::push, 2, [&] { ++fired; });  // already past: fires at once
  CHECK(fired == 2);
}

TEST_CASE("fault triggers and links survive their text form, and bad ones are named") {
  for (std::string text : {"drop:shard:0>worker:1@12x3", "reorder:worker:0>shard:1@push=90x2",
                           "kill:shard:0@1500ms", "delay:directory>worker:0@update=2+30ms",
                           "dup:*>checkpointer@snapshot=1", "eio:fsync@ack=7"}) {
    auto plan = parse_fault_plan(text);
    REQUIRE_MESSAGE(plan, text << ": " << describe(plan.error()));
    CHECK(to_string(*plan) == text);
  }
  auto r = parse_fault_plan("drop:checkpointer>shard:0@3");
  REQUIRE(!r);
  CHECK(describe(r.error()).find("no messages travel 'checkpointer>shard:0'") != std::string::npos);
  // Names the job does not have are refused when the job starts.
  temp_dir dir;
  auto c = probe_job(dir, "drop:worker:5>shard:0@3");
  auto j = job::start(c);
  REQUIRE(!j);
  CHECK(describe(j.error()).find("no worker:5") != std::string::npos);
  c = probe_job(dir, "kill:shard:2@3");
  j = job::start(c);
  REQUIRE(!j);
  CHECK(describe(j.error()).find("no shard:2") != std::string::npos);
}

TEST_CASE("lost, doubled, late and reordered messages on every link leave BSP bit-identical") {
  auto reference = reference_sha();
  struct scenario {
    const char* plan;
    uint64_t message_fault_hits::*hit;  // what the fault did
  };
  for (auto s : {
         scenario{"drop:shard:0>worker:0@5x2", &message_fault_hits::dropped},       // acks and replies lost: retries
         scenario{"drop:worker:1>shard:1@7x2", &message_fault_hits::dropped},       // pushes and pulls lost
         scenario{"dup:shard:1>worker:1@5x4", &message_fault_hits::duplicated},        // answers twice
         scenario{"dup:worker:0>shard:0@9x4", &message_fault_hits::duplicated},        // requests twice: dedup
         scenario{"delay:shard:0@5x6+200ms", &message_fault_hits::delayed},         // late past the request timeout
         scenario{"reorder:worker:1>shard:0@6x3", &message_fault_hits::reordered},    // requests overtaken
         scenario{"reorder:shard:0>worker:0@6x3", &message_fault_hits::reordered},    // answers overtaken
       }) {
    CAPTURE(s.plan);
    temp_dir run_dir;
    auto c = probe_job(run_dir, s.plan);
    auto r = run(c);
    REQUIRE_MESSAGE(r, describe(r.error()));
    CHECK(r->messages_hit.*s.hit > 0);
    check_exactly_once(c, *r);
    CHECK(r->params_sha256 == reference);
  }
}

TEST_CASE("lost snapshots lose their checkpoint, and training goes on without hanging") {
  temp_dir dir;
  // Two checkpoints in a row lose shard:0's snapshot: the window the workers
  // train in would close on them without the checkpointer's timeout.
  auto c = probe_job(dir, "drop:shard:0>checkpointer@snapshot=1x2");
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  CHECK(r->messages_hit.dropped == 2);
  CHECK(count_events(*r, event_kind::checkpoint_failed, "lost") >= 1);
  CHECK(r->checkpoints >= 1);  // later checkpoints commit again
  check_exactly_once(c, *r);

  // Every snapshot of three checkpoints in a row is lost: the checkpointer
  // never hears of them, and the job sees its workers wait at the window.
  temp_dir all_lost;
  c = probe_job(all_lost, "drop:*>checkpointer@snapshot=1x6");
  r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  CHECK(r->messages_hit.dropped == 6);
  CHECK(count_events(*r, event_kind::checkpoint_failed, "none of its snapshots") >= 1);
  check_exactly_once(c, *r);
}

TEST_CASE("a worker that misses a shard's new incarnation finds it through the directory") {
  temp_dir dir;
  auto reference = reference_sha();
  // The directory's updates to worker:0 are lost around a restart of
  // shard:0, so worker:0 keeps the dead handle until a failed request or
  // its periodic lookup tells it the new one.
  auto c = probe_job(dir, "drop:directory>worker:0@9x4,kill:shard:0@10");
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  CHECK(r->messages_hit.dropped >= 1);
  CHECK(r->restarts["shard:0"] >= 1);
  check_exactly_once(c, *r);
  CHECK(r->params_sha256 == reference);
}

TEST_CASE("faults fire at a time and after a number of messages of a kind") {
  temp_dir dir;
  auto c = probe_job(dir, "kill:shard:1@push=30,kill:worker:0@reply=50,kill:checkpointer@0ms");
  c.training.steps = 60;
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  CHECK(r->restarts["shard:1"] >= 1);
  CHECK(r->restarts["worker:0"] >= 1);
  CHECK(r->restarts["checkpointer"] >= 1);
  if (r->restarts["checkpointer"] == 0)
    for (auto& e : r->events)
      MESSAGE(to_string(e));
  CHECK(r->fault_plan.find("kill:shard:1@push=30") != std::string::npos);
  CHECK(r->fault_plan.find("kill:checkpointer@0ms") != std::string::npos);
  check_exactly_once(c, *r);
}

TEST_CASE("the embedding API injects a fault while the job runs") {
  temp_dir dir;
  auto c = probe_job(dir, "");
  c.training.steps = 60;
  auto j = job::start(c);
  REQUIRE(j);
  auto& job = **j;
  bool injected = false;
  caf::error refused;
  job.on_event([&](const job_event& e) {
    if (e.kind == event_kind::checkpoint && !injected) {
      injected = true;
      CHECK(!job.inject(one("drop:worker:0@1x3")));
      refused = job.inject(one("kill:worker:7@1"));
    }
  });
  auto r = job.wait(std::chrono::minutes(2));
  REQUIRE_MESSAGE(r, describe(r.error()));
  CHECK(injected);
  CHECK(refused);
  CHECK(r->messages_hit.dropped == 3);
  CHECK(r->fault_plan == "drop:worker:0@1x3");
  check_exactly_once(c, *r);
}

TEST_CASE("a random plan draws only from the families its mix names") {
  fault_mix mix;
  REQUIRE(!parse_fault_families("messages,timed", mix));
  mix.faults = 20;
  auto plan = random_fault_plan(7, mix);
  REQUIRE(plan.size() == 20);
  bool timed = false;
  for (auto& f : plan) {
    CHECK(f.is_message_fault());
    timed = timed || f.when != trigger::step;
  }
  CHECK(timed);
  REQUIRE(!parse_fault_families("kills", mix));
  for (auto& f : random_fault_plan(7, mix)) {
    CHECK(f.is_kill());
    CHECK(f.when == trigger::step);
    CHECK(f.target != "root");  // supervisors only when named
  }
  auto bad = parse_fault_families("kills,gremlins", mix);
  REQUIRE(bad);
  CHECK(describe(bad).find("'gremlins'") != std::string::npos);
  CHECK(parse_fault_families("timed", mix));  // no fault kind at all
}
