// link_ends, the decorator an actor receives requests and sends answers
// through, on its own: a probe actor whose push handler records the seqs it
// handles and acks them. Each case arms one fault on one link (or none) and
// checks what the handler saw, what the requester got, and the link tally.
#include <chrono>
#include <vector>

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include "actors/core/atoms.hpp"
#include "actors/faults/link_ends.hpp"
#include "messages/register_types.hpp"
#include "two_param_shard.hpp"

using namespace keel;
using namespace std::chrono_literals;

namespace {

struct probe_state {
  link_ends links;
  std::vector<uint64_t> handled;  // the seqs the handler saw, in order
};
using probe_actor = caf::stateful_actor<probe_state>;

push_ack_msg ack_of(schema::Push::Reader p) {
  return build<schema::PushAck>(32, [&](schema::PushAck::Builder b) {
    b.setWorker(p.getWorker());
    b.setSeq(p.getSeq());
    b.setStatus(schema::PushAck::Status::APPLIED);
  });
}

caf::behavior probe_shard(probe_actor* self, std::shared_ptr<link_faults> faults) {
  self->state.links = link_ends(std::move(faults), "shard:0", "worker:", 2);
  return {
    [self](const push_msg& m) -> caf::result<push_ack_msg> {
      return self->state.links.request(self, m, [self](decoded<schema::Push> p) {
        self->state.handled.push_back(p.root().getSeq());
        return ack_of(p.root());
      });
    },
    [self](link_release_atom, uint64_t id) { self->state.links.release(id); },
    [self](caf::get_atom) { return self->state.handled; },
  };
}

fault armed(const std::string& text) {
  auto plan = parse_fault_plan(text);
  REQUIRE_MESSAGE(plan, describe(plan.error()));
  return plan->front();
}

struct probe_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<link_faults> faults;
  caf::actor probe;

  // `fault_text` empty: link faults with nothing armed; "none": no link faults.
  explicit probe_fixture(const std::string& fault_text) {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    if (fault_text != "none")
      faults = std::make_shared<link_faults>();
    if (!fault_text.empty() && fault_text != "none")
      REQUIRE(!faults->arm(armed(fault_text)));
    probe = sys->spawn(probe_shard, faults);
  }
  ~probe_fixture() { caf::anon_send_exit(probe, caf::exit_reason::user_shutdown); }

  std::vector<uint64_t> handled() {
    caf::scoped_actor self{*sys};
    std::vector<uint64_t> out;
    self->request(probe, 10s, caf::get_atom::value)
      .receive([&](const std::vector<uint64_t>& v) { out = v; },
               [&](caf::error& e) { FAIL(describe(e)); });
    return out;
  }
};

push_msg push(uint64_t seq) {
  return test::two_param_push(0, seq, 1.0f);
}

// Sends push `seq` as a request; its acked seq, or 0 when it failed.
uint64_t ask(caf::scoped_actor& self, const caf::actor& probe, uint64_t seq,
             std::chrono::milliseconds timeout = 10s) {
  uint64_t acked = 0;
  self->request(probe, timeout, push(seq))
    .receive([&](const push_ack_msg& a) { acked = decode(a)->root().getSeq(); },
             [&](caf::error&) {});
  return acked;
}

}  // namespace

TEST_CASE("without link faults a request goes straight to its handler and its answer back") {
  probe_fixture f("none");
  caf::scoped_actor self{*f.sys};
  CHECK(ask(self, f.probe, 1) == 1);
  CHECK(ask(self, f.probe, 2) == 2);
  CHECK(f.handled() == std::vector<uint64_t>{1, 2});
}

TEST_CASE("with nothing armed a request and its answer are counted on their links, untouched") {
  probe_fixture f("");
  caf::scoped_actor self{*f.sys};
  CHECK(ask(self, f.probe, 1) == 1);
  CHECK(f.handled() == std::vector<uint64_t>{1});
  CHECK(f.faults->count(msg_kind::push) == 1);
  CHECK(f.faults->count(msg_kind::ack) == 1);
  CHECK(f.faults->hits() == message_fault_hits{});
}

TEST_CASE("a dropped request never reaches the handler: its sender times out") {
  probe_fixture f("drop:worker:0>shard:0@1x1");
  caf::scoped_actor self{*f.sys};
  CHECK(ask(self, f.probe, 1, 200ms) == 0);
  CHECK(f.handled().empty());
  CHECK(f.faults->hits().dropped == 1);
  CHECK(ask(self, f.probe, 1) == 1);  // the fault is used up: the retry goes through
  CHECK(f.handled() == std::vector<uint64_t>{1});
}

TEST_CASE("a dropped answer leaves the request handled and its sender timing out") {
  probe_fixture f("drop:shard:0>worker:0@1x1");
  caf::scoped_actor self{*f.sys};
  CHECK(ask(self, f.probe, 1, 200ms) == 0);
  CHECK(f.handled() == std::vector<uint64_t>{1});
  CHECK(f.faults->hits().dropped == 1);
}

TEST_CASE("a duplicated request reaches the handler again, and its sender gets one answer") {
  probe_fixture f("dup:worker:0>shard:0@1x1");
  caf::scoped_actor self{*f.sys};
  CHECK(ask(self, f.probe, 1) == 1);
  // Handled, then its copy twice, once answered again and once not: the
  // shard has always seen a doubled push so (link_ends::request).
  CHECK(f.handled() == std::vector<uint64_t>{1, 1, 1});
  CHECK(f.faults->hits().duplicated == 1);
  CHECK(f.faults->count(msg_kind::ack) == 2);
}

TEST_CASE("a duplicated answer is delivered twice as the response, and the requester takes one") {
  probe_fixture f("dup:shard:0>worker:0@1x1");
  caf::scoped_actor self{*f.sys};
  CHECK(ask(self, f.probe, 1) == 1);
  CHECK(f.handled() == std::vector<uint64_t>{1});
  CHECK(f.faults->hits().duplicated == 1);
  CHECK(f.faults->count(msg_kind::ack) == 1);
}

TEST_CASE("a delayed request is handled and answered after its delay") {
  probe_fixture f("delay:worker:0>shard:0@1x1+100ms");
  caf::scoped_actor self{*f.sys};
  auto start = std::chrono::steady_clock::now();
  CHECK(ask(self, f.probe, 1) == 1);
  CHECK(std::chrono::steady_clock::now() - start >= 100ms);
  CHECK(f.handled() == std::vector<uint64_t>{1});
  CHECK(f.faults->hits().delayed == 1);
}

TEST_CASE("a reordered request is handled right after the next request on its link") {
  probe_fixture f("reorder:worker:0>shard:0@1x1");
  caf::scoped_actor self{*f.sys};
  self->send(f.probe, push(1));
  self->send(f.probe, push(2));
  CHECK(f.handled() == std::vector<uint64_t>{2, 1});
  CHECK(f.faults->hits().reordered == 1);
}
