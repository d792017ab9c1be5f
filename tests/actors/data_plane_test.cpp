// The data plane's listening side against a peer played by the test over a
// raw socket: the handshake both ways, requests to a real shard, and every
// kind of bad input (wrong secret, bad header, bad frame, unknown target).
// Two processes using it end to end are in tests/cluster/cluster_job_test.cpp.
#include <cstring>
#include <mutex>
#include <thread>

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include "actors/data_plane/data_plane.hpp"
#include "actors/data_plane/data_plane_wire.hpp"
#include "cli_run.hpp"
#include "two_param_shard.hpp"

using namespace keel;
using namespace std::chrono_literals;
using Status = schema::PushAck::Status;

namespace {

cluster_secret secret(const std::string& text) {
  auto s = cluster_secret::from_bytes(text, "test");
  REQUIRE(s);
  return *s;
}

push_msg push(uint32_t worker, uint64_t seq, float g) {
  return test::two_param_push(worker, seq, g);
}

pull_request_msg pull(uint32_t worker) {
  return build<schema::PullRequest>(64, [&](schema::PullRequest::Builder b) {
    b.setWorker(worker);
    b.setClock(0);
    auto r = b.initDense(1)[0];
    r.setBegin(0);
    r.setEnd(2);
  });
}

// The two-parameter shard, served on a data plane of its own.
struct plane_fixture : test::two_param_shard {
  std::shared_ptr<data_plane> plane;
  std::mutex log_mtx;
  std::string log;

  explicit plane_fixture(size_t max_incoming = 256) {
    data_plane_config dc;
    dc.secret = secret("the cluster secret, 32 bytes ok");
    dc.connect_timeout = 2000ms;
    dc.max_incoming = max_incoming;
    dc.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> guard(log_mtx);
      log += line + "\n";
    };
    auto p = data_plane::start(*sys, dc);
    REQUIRE_MESSAGE(p, describe(p.error()));
    plane = *p;
    plane->serve(shard);
  }
  ~plane_fixture() { plane->stop(); }

  std::string logged() {
    std::lock_guard<std::mutex> guard(log_mtx);
    return log;
  }
};

// A peer: connects and, unless told otherwise, passes the handshake.
struct peer {
  dp::socket_fd fd;
  std::unique_ptr<dp::link> io;

  peer(plane_fixture& f, const cluster_secret& s, caf::error* handshake = nullptr) {
    auto c = dp::connect_to("127.0.0.1", f.plane->port(), 2000ms);
    REQUIRE_MESSAGE(c, describe(c.error()));
    fd = std::move(*c);
    io = std::make_unique<dp::link>(fd.get());
    auto err = dp::handshake_client(*io, s, "test-peer", f.plane->node());
    if (handshake)
      *handshake = err;
    else
      REQUIRE_MESSAGE(!err, describe(err));
  }

  void send(dp::kind k, uint64_t slot, uint64_t target, const frame_ptr& f) {
    REQUIRE(dp::write_frame(*io, dp::header{k, slot, target, 0}, *f));
  }

  // The next answer's header, and its frame or text.
  dp::header answer(frame_ptr& f, std::string& text) {
    unsigned char raw[dp::header_bytes];
    REQUIRE(dp::read_exact(fd.get(), raw, sizeof raw));
    auto h = dp::decode_header(raw);
    REQUIRE_MESSAGE(h, describe(h.error()));
    if (h->k == dp::kind::error) {
      auto t = dp::read_text(*io, *h);
      REQUIRE(t);
      text = *t;
    } else {
      auto got = dp::read_frame(*io, *h);
      REQUIRE_MESSAGE(got, describe(got.error()));
      f = *got;
    }
    return *h;
  }

  Status push_status(uint64_t slot, uint64_t target, const push_msg& m) {
    send(dp::kind::push, slot, target, m.frame());
    frame_ptr f;
    std::string text;
    auto h = answer(f, text);
    REQUIRE_MESSAGE(h.k == dp::kind::push_ack, text);
    CHECK(h.slot == slot);
    auto a = decode(push_ack_msg(f));
    REQUIRE(a);
    return a->root().getStatus();
  }

  // True once the listener has closed this connection.
  bool closed_by_listener() {
    unsigned char c;
    dp::set_options(fd.get(), 5000ms);
    return !dp::read_exact(fd.get(), &c, 1) && errno == 0;
  }
};

}  // namespace

TEST_CASE("data plane headers: a bad magic, kind or length is refused with its reason") {
  unsigned char raw[dp::header_bytes];
  dp::encode_header(dp::header{dp::kind::push, 7, 9, 64}, raw);
  auto ok = dp::decode_header(raw);
  REQUIRE(ok);
  CHECK(ok->k == dp::kind::push);
  CHECK(ok->slot == 7);
  CHECK(ok->target == 9);
  CHECK(ok->length == 64);
  auto refused = [](dp::header h, uint32_t magic, const std::string& what) {
    unsigned char b[dp::header_bytes];
    dp::encode_header(h, b);
    if (magic != dp::header_magic)
      std::memcpy(b, &magic, 4);
    auto got = dp::decode_header(b);
    REQUIRE(!got);
    CHECK_MESSAGE(describe(got.error()).find(what) != std::string::npos, describe(got.error()));
  };
  refused({dp::kind::push, 1, 1, 64}, 0x12345678, "magic");
  refused({static_cast<dp::kind>(9), 1, 1, 64}, dp::header_magic, "unknown message kind 9");
  refused({dp::kind::push, 1, 1, 12}, dp::header_magic, "not a whole number of words");
  refused({dp::kind::pull_reply, 1, 1, 0}, dp::header_magic, "not a whole number of words");
  refused({dp::kind::push, 1, 1, max_frame_bytes + 8}, dp::header_magic, "exceeds the limit");
  refused({dp::kind::error, 1, 0, dp::max_error_text + 1}, dp::header_magic, "error text of");
}

TEST_CASE("a peer that proves the secret pushes and pulls over the data plane, and the shard acks a duplicate and applies it once") {
  plane_fixture f;
  peer p(f, secret("the cluster secret, 32 bytes ok"));
  CHECK(p.push_status(1, f.shard.id(), push(0, 1, -1.0f)) == Status::APPLIED);
  CHECK(p.push_status(2, f.shard.id(), push(0, 1, -1.0f)) == Status::DUPLICATE);
  CHECK(f.param0() == doctest::Approx(1.0f));
  p.send(dp::kind::pull, 3, f.shard.id(), pull(0).frame());
  frame_ptr fr;
  std::string text;
  auto h = p.answer(fr, text);
  REQUIRE_MESSAGE(h.k == dp::kind::pull_reply, text);
  CHECK(h.slot == 3);
  auto r = decode(pull_reply_msg(fr));
  REQUIRE_MESSAGE(r, describe(r.error()));
  auto values = r->root().getDense()[0].getValues();
  float v[2];
  REQUIRE(values.size() == sizeof v);
  std::memcpy(v, values.begin(), sizeof v);
  CHECK(v[0] == doctest::Approx(1.0f));
  auto s = f.plane->stats();
  CHECK(s.connections_in == 1);
  CHECK(s.requests_in == 3);
  CHECK(s.bytes_in > 0);
  CHECK(s.bytes_out > 0);
}

TEST_CASE("a request for an actor the node does not serve gets an error naming it, and the connection goes on") {
  plane_fixture f;
  peer p(f, secret("the cluster secret, 32 bytes ok"));
  p.send(dp::kind::push, 5, 424242, push(0, 1, -1.0f).frame());
  frame_ptr fr;
  std::string text;
  auto h = p.answer(fr, text);
  CHECK(h.k == dp::kind::error);
  CHECK(h.slot == 5);
  CHECK_MESSAGE(text.find("actor 424242 is not served") != std::string::npos, text);
  CHECK(p.push_status(6, f.shard.id(), push(0, 1, -1.0f)) == Status::APPLIED);
  // A shard that stopped is no longer served.
  caf::scoped_actor self{*f.sys};
  self->monitor(f.shard);
  caf::anon_send_exit(f.shard, caf::exit_reason::user_shutdown);
  self->receive([](caf::down_msg&) {});
  // CAF runs the shard's exit hooks in no fixed order: a push sent right
  // after the down message may still reach the dead shard and be answered
  // with its request_receiver_down. Either way the answer is an error; soon
  // the shard is not served at all.
  uint64_t slot = 7;
  CHECK(test::wait_until(
    [&] {
      p.send(dp::kind::push, slot, f.shard.id(), push(0, 2, -1.0f).frame());
      h = p.answer(fr, text);
      CHECK(h.k == dp::kind::error);
      CHECK(h.slot == slot++);
      return text.find("not served") != std::string::npos;
    },
    5s));
}

TEST_CASE("the data plane refuses a peer with the wrong secret, both ways, and logs it") {
  plane_fixture f;
  SUBCASE("the peer finds that the listener does not know its secret") {
    caf::error err;
    peer p(f, secret("another secret, also 32 bytes.."), &err);
    REQUIRE(err);
    CHECK_MESSAGE(describe(err).find("does not prove the cluster secret") != std::string::npos, describe(err));
  }
  SUBCASE("the listener finds that the peer does not know the secret") {
    auto c = dp::connect_to("127.0.0.1", f.plane->port(), 2000ms);
    REQUIRE(c);
    // A hello, then a proof of zeros over the listener's challenge.
    std::string hello = "KEELDP01";
    uint32_t n = 4;
    hello.append(reinterpret_cast<const char*>(&n), 4);
    hello += "liar";
    hello.append(32, '\x01');
    REQUIRE(dp::write_exact(c->get(), hello.data(), hello.size()));
    std::vector<unsigned char> theirs(8 + 4 + f.plane->node().size() + 32 + 32);
    REQUIRE(dp::read_exact(c->get(), theirs.data(), theirs.size()));
    std::string zeros(32, '\0');
    REQUIRE(dp::write_exact(c->get(), zeros.data(), zeros.size()));
    unsigned char verdict;
    CHECK(!dp::read_exact(c->get(), &verdict, 1));
    CHECK(test::wait_until([&] { return f.plane->stats().refused == 1; }, 5s));
    CHECK_MESSAGE(f.logged().find("node liar does not prove the cluster secret") != std::string::npos, f.logged());
  }
  CHECK(f.plane->stats().connections_in == 0);
  CHECK(f.param0() == 0.0f);
}

TEST_CASE("bad bytes after the handshake close that connection, are logged, apply nothing, and others are served") {
  plane_fixture f;
  auto s = secret("the cluster secret, 32 bytes ok");
  SUBCASE("a header out of sync") {
    peer p(f, s);
    std::string junk(dp::header_bytes, 'x');
    REQUIRE(dp::write_exact(p.fd.get(), junk.data(), junk.size()));
    CHECK(p.closed_by_listener());
    CHECK(test::wait_until([&] { return f.logged().find("magic") != std::string::npos; }, 5s));
  }
  SUBCASE("a frame whose segment table claims more than it holds") {
    peer p(f, s);
    unsigned char raw[dp::header_bytes + 16] = {};
    dp::encode_header(dp::header{dp::kind::push, 1, f.shard.id(), 16}, raw);
    uint32_t table[2] = {0, 1000};  // one segment of 1000 words, in 8 bytes
    std::memcpy(raw + dp::header_bytes, table, sizeof table);
    REQUIRE(dp::write_exact(p.fd.get(), raw, sizeof raw));
    CHECK(p.closed_by_listener());
    CHECK(test::wait_until([&] { return f.logged().find("sent bad bytes") != std::string::npos; }, 5s));
  }
  SUBCASE("an answer sent where requests are expected") {
    peer p(f, s);
    p.send(dp::kind::push_ack, 1, 0, push(0, 1, -1.0f).frame());
    CHECK(p.closed_by_listener());
    CHECK(test::wait_until([&] { return f.logged().find("where requests are expected") != std::string::npos; }, 5s));
  }
  CHECK(f.plane->stats().refused == 1);
  CHECK(f.param0() == 0.0f);
  peer good(f, s);
  CHECK(good.push_status(1, f.shard.id(), push(0, 1, -1.0f)) == Status::APPLIED);
}

TEST_CASE("stopping the data plane closes its connections and does not wait for peers") {
  plane_fixture f;
  peer p(f, secret("the cluster secret, 32 bytes ok"));
  CHECK(p.push_status(1, f.shard.id(), push(0, 1, -1.0f)) == Status::APPLIED);
  f.plane->stop();
  CHECK(p.closed_by_listener());
  f.plane->stop();  // idempotent
  auto late = dp::connect_to("127.0.0.1", f.plane->port(), 500ms);
  if (late) {  // the port may still accept into the backlog; nothing answers
    caf::error err;
    dp::link l(late->get());
    l.set_timeout(500ms);
    err = dp::handshake_client(l, secret("the cluster secret, 32 bytes ok"), "late", "");
    CHECK(err);
  }
}

TEST_CASE("connections beyond the data plane's limit are refused at once and logged, and a slot freed is used again") {
  plane_fixture f(2);
  auto s = secret("the cluster secret, 32 bytes ok");
  auto first = std::make_unique<peer>(f, s);
  peer second(f, s);
  auto third = dp::connect_to("127.0.0.1", f.plane->port(), 2000ms);
  REQUIRE(third);
  dp::set_options(third->get(), 5000ms);
  unsigned char c;
  CHECK(!dp::read_exact(third->get(), &c, 1));  // closed by the listener, not timed out
  CHECK(errno == 0);
  CHECK(test::wait_until([&] { return f.logged().find("(the limit)") != std::string::npos; }, 5s));
  CHECK(f.plane->stats().refused == 1);
  CHECK(second.push_status(1, f.shard.id(), push(0, 1, -1.0f)) == Status::APPLIED);
  // The first peer leaves; once its connection is gone, a new one is served.
  first.reset();
  CHECK(test::wait_until(
    [&] {
      auto p = dp::connect_to("127.0.0.1", f.plane->port(), 2000ms);
      if (!p)
        return false;
      dp::link l(p->get());
      l.set_timeout(2000ms);
      return !dp::handshake_client(l, s, "later", f.plane->node());
    },
    5s));
}

TEST_CASE("refusals name the peer's address and the port, and each is logged or counted in a summary line") {
  plane_fixture f;
  constexpr int strangers = 30;
  for (int i = 0; i < strangers; ++i) {
    auto c = dp::connect_to("127.0.0.1", f.plane->port(), 2000ms);
    REQUIRE(c);
    dp::set_options(c->get(), 5000ms);
    const char garbage[12] = "GET / HTTP/";
    REQUIRE(dp::write_exact(c->get(), garbage, sizeof garbage));
    unsigned char b;
    CHECK(!dp::read_exact(c->get(), &b, 1));  // closed by the listener
  }
  CHECK(test::wait_until([&] { return f.plane->stats().refused == strangers; }, 5s));
  f.plane->stop();  // writes the count of a window still open
  auto log = f.logged();
  CHECK_MESSAGE(log.find("refused a connection from 127.0.0.1:") != std::string::npos, log);
  CHECK_MESSAGE(log.find(" to port " + std::to_string(f.plane->port()) + ": ") != std::string::npos, log);
  // Every refusal is either a line of its own or in a count.
  size_t lines = 0, counted = 0;
  for (size_t at = 0; (at = log.find("refused a connection from", at)) != std::string::npos; ++at) ++lines;
  for (size_t at = 0; (at = log.find(" more refused connections in", at)) != std::string::npos; ++at) {
    auto start = log.rfind('\n', at);
    counted += std::stoul(log.substr(start == std::string::npos ? 0 : start + 1, at));
  }
  CHECK(lines + counted == strangers);  // whether 20 fell in one second is up to the scheduler
}
