#include <algorithm>
#include <cstring>

#include <doctest/doctest.h>

#include "actors/core/shard_core.hpp"
#include "actors/core/shard_snapshot.hpp"
#include "actors/core/tensor_recycler.hpp"
#include "actors/core/update_rules.hpp"
#include "push_builder.hpp"

using namespace keel;
using namespace keel::test;
using Status = schema::PushAck::Status;

namespace {

shard_config config(consistency_kind kind, uint32_t workers, uint32_t staleness = 0) {
  shard_config c;
  c.shard = 1;
  c.num_workers = workers;
  c.dense = {10, 14};
  c.sparse = {1000, 2000};
  c.rule = {kind, staleness};
  c.optimizer.kind = optimizer_kind::sgd;
  c.optimizer.lr = 1.0f;
  return c;
}

// Equal sizes and the same bytes (an empty vector's data() may be null).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

// A shard of `cfg` starting at `values`.
shard_core fresh(const shard_config& cfg, std::vector<float> values) {
  auto core = shard_core::make(cfg, std::move(values));
  REQUIRE_MESSAGE(core, describe(core.error()));
  return std::move(*core);
}

shard_core make(consistency_kind kind, uint32_t workers, uint32_t staleness = 0) {
  return fresh(config(kind, workers, staleness), std::vector<float>(4, 0.0f));
}

// A snapshot of an ASP shard holding four known values, for the CRC tests.
struct four_values {
  shard_config cfg = config(consistency_kind::asp, 1);
  std::vector<float> values = {0.5f, -0.5f, 1.25f, 2.0f};
  shard_snapshot_msg snap;

  four_values() {
    auto s = snapshot_of(fresh(cfg, values), 1, 0);
    REQUIRE(s);
    snap = *s;
  }

  // The snapshot's stream encoding, as a file or another process has it.
  std::vector<unsigned char> bytes() const {
    std::vector<unsigned char> out(snap.frame()->encoded_size_bytes());
    snap.frame()->encode_to(out.data());
    return out;
  }

  // Those bytes with one bit of 1.25f flipped after its CRC was taken (it
  // becomes another finite value).
  std::vector<unsigned char> changed_bytes() const {
    auto out = bytes();
    auto first = reinterpret_cast<const unsigned char*>(values.data());
    auto at = std::search(out.begin(), out.end(), first, first + 16);
    REQUIRE(at != out.end());
    at[8] ^= 0x01;
    return out;
  }
};

frame_ptr parsed(const std::vector<unsigned char>& bytes) {
  auto f = frame::parse_copy(bytes.data(), bytes.size(), *buffer_pool::process_default());
  REQUIRE(f);
  return *f;
}

}  // namespace

TEST_CASE("a duplicated push is acknowledged again and applied once") {
  auto s = make(consistency_kind::asp, 1);
  CHECK(s.offer(make_push(0, 1, 0, 10, {-1, -1, -1, -1})).status == Status::APPLIED);
  CHECK(s.offer(make_push(0, 1, 0, 10, {-1, -1, -1, -1})).status == Status::DUPLICATE);
  CHECK(s.dense()[0] == 1.0f);
  CHECK(s.version() == 1);
  CHECK(s.applied(0) == 1);
}

TEST_CASE("a push whose seq skips ahead is refused with the seq the shard needs next") {
  auto s = make(consistency_kind::asp, 1);
  s.offer(make_push(0, 1, 0, 10, {1, 1, 1, 1}));
  auto o = s.offer(make_push(0, 3, 2, 10, {1, 1, 1, 1}));
  CHECK(o.status == Status::OUT_OF_ORDER);
  CHECK(o.expected_seq == 2);
  CHECK(s.version() == 1);  // nothing applied
}

TEST_CASE("a push outside the shard's keys or from an unknown worker is rejected, naming why") {
  auto s = make(consistency_kind::asp, 2);
  auto o1 = s.offer(make_push(0, 1, 0, 12, {1, 1, 1}));
  CHECK(o1.status == Status::REJECTED);
  CHECK(o1.reason.find("[12,15) is not inside shard 1's dense keys [10,14)") != std::string::npos);
  auto o2 = s.offer(make_push(5, 1, 0, 10, {1}));
  CHECK(o2.status == Status::REJECTED);
  CHECK(o2.reason.find("worker 5") != std::string::npos);
  auto o3 = s.offer(make_push(1, 1, 0, 0, {}, {{5000}, {1.0f}}));
  CHECK(o3.status == Status::REJECTED);
  CHECK(s.version() == 0);
}

TEST_CASE("BSP holds a step until every worker pushed it, then applies the sum once") {
  auto s = make(consistency_kind::bsp, 2);
  CHECK(!s.can_serve(1));
  auto o = s.offer(make_push(1, 1, 0, 10, {-1, -1, -1, -1}));
  CHECK(o.status == Status::ACCEPTED);
  CHECK(o.steps_applied == 0);
  CHECK(s.dense()[0] == 0.0f);
  CHECK(s.applied(1) == 0);
  o = s.offer(make_push(0, 1, 0, 10, {-2, -2, -2, -2}));
  CHECK(o.steps_applied == 1);
  CHECK(s.dense()[0] == 3.0f);
  CHECK(s.bsp_clock() == 1);
  CHECK(s.can_serve(1));
  CHECK(!s.can_serve(2));
  CHECK(s.applied(0) == 1);
  CHECK(s.applied(1) == 1);
}

TEST_CASE("BSP's result does not depend on the order in which workers' pushes arrive") {
  // Float addition is not associative: 1e8 + 1 - 1e8 depends on the order.
  std::vector<std::vector<float>> g = {{1e8f, 1, 1, 1}, {1, 1e8f, 1, 1}, {-1e8f, -1e8f, 1, 1}};
  auto run = [&](std::vector<uint32_t> order) {
    auto s = make(consistency_kind::bsp, 3);
    for (uint64_t step = 0; step < 3; ++step)
      for (auto w : order)
        s.offer(make_push(w, step + 1, step, 10, g[w]));
    CHECK(s.bsp_clock() == 3);
    return s.dense();
  };
  auto a = run({0, 1, 2});
  CHECK(a == run({2, 1, 0}));
  CHECK(a == run({1, 2, 0}));
}

TEST_CASE("BSP accepts a worker's later steps early and applies them in step order") {
  auto s = make(consistency_kind::bsp, 2);
  s.offer(make_push(0, 1, 0, 10, {-1, 0, 0, 0}));
  s.offer(make_push(0, 2, 1, 10, {-1, 0, 0, 0}));  // replay runs ahead of worker 1
  CHECK(s.bsp_clock() == 0);
  auto o = s.offer(make_push(1, 1, 0, 10, {-1, 0, 0, 0}));
  CHECK(o.steps_applied == 1);
  o = s.offer(make_push(1, 2, 1, 10, {-1, 0, 0, 0}));
  CHECK(o.steps_applied == 1);
  CHECK(s.bsp_clock() == 2);
  CHECK(s.dense()[0] == 4.0f);
}

TEST_CASE("SSP serves a pull at clock c once the slowest worker is within the bound") {
  auto s = make(consistency_kind::ssp, 2, 1);
  CHECK(s.can_serve(1));   // slowest at 0, bound 1
  CHECK(!s.can_serve(2));
  s.offer(make_push(0, 1, 0, 10, {1, 1, 1, 1}));
  s.offer(make_push(0, 2, 1, 10, {1, 1, 1, 1}));
  CHECK(!s.can_serve(2));  // worker 1 still at clock 0
  s.offer(make_push(1, 1, 0, 10, {1, 1, 1, 1}));
  CHECK(s.can_serve(2));
  CHECK(!s.can_serve(3));
}

TEST_CASE("ASP applies each push on arrival and serves any clock") {
  auto s = make(consistency_kind::asp, 2);
  CHECK(s.can_serve(100));
  s.offer(make_push(1, 1, 7, 10, {-1, -1, -1, -1}, {{1500}, {-2.0f}}));
  CHECK(s.dense()[3] == 1.0f);
  CHECK(s.sparse().at(1500).value == 2.0f);
}

TEST_CASE("a pull reads the requested dense ranges and sparse keys, unseen sparse keys as 0") {
  auto s = make(consistency_kind::asp, 1);
  s.offer(make_push(0, 1, 0, 10, {-1, -2, -3, -4}, {{1001}, {-5.0f}}));
  auto req = build<schema::PullRequest>(64, [](auto b) {
    auto d = b.initDense(1);
    d[0].setBegin(11);
    d[0].setEnd(13);
    auto k = b.initSparseKeys(2);
    k.set(0, 1001);
    k.set(1, 1002);
  });
  auto r = decode(req);
  REQUIRE(r);
  for (bool own_buffers : {false, true}) {  // values in the message, or copied into buffers of their own
    CAPTURE(own_buffers);
    frame_builder fb;
    auto reply = fb.message().initRoot<schema::PullReply>();
    reply.setVersion(schema::PROTOCOL_VERSION);
    REQUIRE(!s.read(r->root(), reply, own_buffers ? &fb : nullptr));
    auto v = reply.asReader().getDense()[0].getValues();
    REQUIRE(v.size() == 8);
    float f[2];
    std::memcpy(f, v.begin(), 8);
    CHECK(f[0] == 2.0f);
    CHECK(f[1] == 3.0f);
    CHECK(reply.asReader().getSparse().getValues()[0] == 5.0f);
    CHECK(reply.asReader().getSparse().getValues()[1] == 0.0f);
    auto sealed = decode(pull_reply_msg(fb.finish()));
    REQUIRE_MESSAGE(sealed, describe(sealed.error()));
    CHECK(sealed->root().getDense()[0].getValues().size() == 8);
  }
}

TEST_CASE("a shard restored from its snapshot continues exactly as the original") {
  for (auto kind : {optimizer_kind::sgd, optimizer_kind::momentum, optimizer_kind::adagrad,
                    optimizer_kind::adam}) {
    CAPTURE(to_string(kind));
    auto cfg = config(consistency_kind::bsp, 2);
    cfg.optimizer.kind = kind;
    cfg.optimizer.lr = 0.1f;
    auto a = fresh(cfg, {0.5f, -0.5f, 1.0f, 2.0f});
    auto push_step = [](shard_core& s, uint64_t step) {
      for (uint32_t w = 0; w < 2; ++w)
        s.offer(make_push(w, step + 1, step, 10,
                          {0.1f * static_cast<float>(step + w), -0.2f, 0.3f, 0.05f},
                          {{1000 + step}, {0.5f}}));
    };
    for (uint64_t step = 0; step < 3; ++step)
      push_step(a, step);
    auto snap = snapshot_of(a, 1, 0);
    REQUIRE_MESSAGE(snap, describe(snap.error()));
    auto d = decode(*snap);
    REQUIRE_MESSAGE(d, describe(d.error()));
    auto b = restore_shard(cfg, d->root());
    REQUIRE_MESSAGE(b, describe(b.error()));
    for (uint64_t step = 3; step < 6; ++step) {
      push_step(a, step);
      push_step(*b, step);
    }
    CHECK(a.dense() == b->dense());
    CHECK(a.dense_slot(0) == b->dense_slot(0));
    CHECK(a.version() == b->version());
    CHECK(a.sparse().size() == b->sparse().size());
    CHECK(a.sparse().at(1004).value == b->sparse().at(1004).value);
  }
}

TEST_CASE("restoring a snapshot into a shard of another shape is refused, naming the tensor and both shapes") {
  auto cfg = config(consistency_kind::asp, 1);
  auto a = fresh(cfg, std::vector<float>(4, 1.0f));
  auto snap = snapshot_of(a, 1, 0);
  REQUIRE(snap);
  auto d = decode(*snap);
  REQUIRE(d);
  auto other = cfg;
  other.dense = {10, 16};
  auto b = restore_shard(other, d->root());
  REQUIRE(!b);
  CHECK(is(b.error(), errc::shape_mismatch));
  CHECK(describe(b.error()).find("tensor 'dense' is float32[4], expected float32[6]") != std::string::npos);
}

TEST_CASE("a one-worker BSP shard applies each step from the push as an ASP shard does, bit for bit") {
  for (auto kind : {optimizer_kind::sgd, optimizer_kind::adam}) {
    CAPTURE(to_string(kind));
    auto cfg = config(consistency_kind::bsp, 1);
    cfg.optimizer.kind = kind;
    cfg.optimizer.lr = 0.1f;
    auto bsp = fresh(cfg, {0.5f, -0.25f, 1.0f, 2.0f});
    cfg.rule = {consistency_kind::asp, 0};
    auto asp = fresh(cfg, {0.5f, -0.25f, 1.0f, 2.0f});
    for (uint64_t step = 0; step < 4; ++step) {
      std::vector<float> g = {0.1f * static_cast<float>(step + 1), -0.3f, 0.7f, 1e-3f};
      sparse_grad sp{{1000 + step, 1500}, {0.5f, -0.5f}};
      auto ob = bsp.offer(make_push(0, step + 1, step, 10, g, sp));
      auto oa = asp.offer(make_push(0, step + 1, step, 10, g, sp));
      CHECK(ob.status == Status::ACCEPTED);
      CHECK(ob.steps_applied == 1);
      CHECK(oa.status == Status::APPLIED);
    }
    CHECK(bsp.bsp_clock() == 4);
    CHECK(bsp.version() == asp.version());
    CHECK(bsp.optimizer_steps() == asp.optimizer_steps());
    CHECK(bsp.applied(0) == 4);
    CHECK(same_bits(bsp.dense(), asp.dense()));
    CHECK(same_bits(bsp.dense_slot(0), asp.dense_slot(0)));  // empty for sgd
    CHECK(same_bits(bsp.dense_slot(1), asp.dense_slot(1)));
    CHECK(bsp.sparse().at(1500).value == asp.sparse().at(1500).value);
    CHECK(bsp.dense()[1] != -0.25f);
  }
}

TEST_CASE("check_shard_snapshot refuses what restore_shard refuses, and a flipped value by its CRC") {
  four_values fv;
  auto& cfg = fv.cfg;
  auto d = decode(fv.snap);
  REQUIRE(d);
  CHECK_FALSE(check_shard_snapshot(cfg, d->root()));
  auto other = cfg;
  other.dense = {10, 16};
  auto err = check_shard_snapshot(other, d->root());
  REQUIRE(err);
  CHECK(describe(err).find("tensor 'dense' is float32[4], expected float32[6]") != std::string::npos);

  // The same snapshot with one parameter's bytes changed after its CRC was taken.
  auto cd = decode(shard_snapshot_msg(parsed(fv.changed_bytes())));
  REQUIRE_MESSAGE(cd, describe(cd.error()));
  auto refused = check_shard_snapshot(cfg, cd->root());
  REQUIRE(refused);
  CHECK(is(refused, errc::damaged_snapshot));
  CHECK_FALSE(restore_shard(cfg, cd->root()));
  // verify_mode::structure is for frames already checked: it skips the CRCs.
  auto unchecked = restore_shard(cfg, cd->root(), verify_mode::structure);
  REQUIRE(unchecked);
  CHECK(unchecked->dense()[2] != 1.25f);
}

TEST_CASE("check_shard_snapshot on a frame checks the CRCs of a frame from bytes once, and the structure every time") {
  four_values fv;
  auto& cfg = fv.cfg;
  auto other = cfg;
  other.dense = {10, 16};
  // Made here: its CRCs are known good, its shapes are still checked.
  CHECK_FALSE(check_shard_snapshot(cfg, fv.snap.frame()));
  auto err = check_shard_snapshot(other, fv.snap.frame());
  REQUIRE(err);
  CHECK(describe(err).find("tensor 'dense' is float32[4], expected float32[6]") != std::string::npos);
  CHECK(check_shard_snapshot(cfg, frame_ptr{}));

  // The same bytes parsed again (as from a file or another process), once
  // intact and once with a parameter changed after its CRC was taken.
  auto intact = parsed(fv.bytes());
  CHECK_FALSE(check_shard_snapshot(cfg, intact));
  CHECK(check_shard_snapshot(other, intact));
  auto changed = parsed(fv.changed_bytes());
  for (int i = 0; i < 2; ++i) {  // refused, and not remembered as good
    auto refused = check_shard_snapshot(cfg, changed);
    REQUIRE(refused);
    CHECK(is(refused, errc::damaged_snapshot));
    CHECK(describe(refused).find("dense") != std::string::npos);
  }
}

TEST_CASE("a restore checks the CRC of each dense tensor beside its copy, and reuses the arrays of a shard that went away") {
  auto cfg = config(consistency_kind::asp, 1);
  cfg.optimizer.kind = optimizer_kind::adam;  // two slot tensors
  const size_t n = 400000;                   // 1.6 MB a tensor: several copy blocks, recycled
  cfg.dense = {10, 10 + n};
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i % 1000) * 0.25f;
  auto snap = [&] {
    auto a = fresh(cfg, values);
    auto s = snapshot_of(a, 1, 0);
    REQUIRE(s);
    return *s;
  }();
  // `a` went away: its arrays wait for the next restore.
  auto kept = tensor_recycler::cached_bytes();
  CHECK(kept >= 3 * n * sizeof(float));
  auto d = decode(snap);
  REQUIRE(d);
  {
    auto r = restore_shard(cfg, d->root());
    REQUIRE_MESSAGE(r, describe(r.error()));
    CHECK(tensor_recycler::cached_bytes() + 3 * n * sizeof(float) <= kept);
    CHECK(same_bits(r->dense(), values));
  }
  // One value flipped deep in dense (past the first copy blocks), then one
  // in a slot: each restore refuses the snapshot naming that tensor.
  const auto& f = *snap.frame();
  std::vector<unsigned char> bytes(f.encoded_size_bytes());
  f.encode_to(bytes.data());
  auto flipped = [&](size_t byte_at, const char* tensor) {
    auto copy = bytes;
    copy[byte_at] ^= 0x01;
    auto changed = frame::parse_copy(copy.data(), copy.size(), *buffer_pool::process_default());
    REQUIRE(changed);
    auto cd = decode(shard_snapshot_msg(*changed));
    REQUIRE_MESSAGE(cd, describe(cd.error()));
    auto r = restore_shard(cfg, cd->root());
    REQUIRE(!r);
    CHECK(is(r.error(), errc::damaged_snapshot));
    CHECK_MESSAGE(describe(r.error()).find(std::string("tensor '") + tensor + "': CRC32C mismatch") !=
                    std::string::npos,
                  describe(r.error()));
  };
  // Where a tensor's last chunk ends in the encoded bytes (table, then segments).
  auto end_of = [&](const char* tensor) -> size_t {
    auto segs = f.segments();
    size_t table = (segs.size() / 2 + 1) * 8;
    for (auto t : d->root().getTensors()) {
      if (t.getName() != tensor)
        continue;
      auto chunks = t.getChunks();
      auto last = chunks[chunks.size() - 1];
      auto p = reinterpret_cast<const capnp::word*>(last.end());
      size_t before = table;
      for (auto seg : segs) {
        if (p > seg.begin() && p <= seg.end())
          return before + static_cast<size_t>(reinterpret_cast<const unsigned char*>(p) -
                                              reinterpret_cast<const unsigned char*>(seg.begin()));
        before += seg.size() * sizeof(capnp::word);
      }
    }
    FAIL("no tensor " << tensor);
    return 0;
  };
  flipped(end_of("dense") - 9, "dense");
  flipped(end_of("dense.slot2") - 5, "dense.slot2");
}

namespace {

// A push of `dense` from `begin` in two ranges split at `split` values: a
// BSP step with such a push takes the shard's general path (sum, then apply).
decoded<schema::Push> split_push(uint32_t worker, uint64_t seq, uint64_t step, uint64_t begin,
                                 const std::vector<float>& dense, size_t split) {
  auto m = build<schema::Push>(256 + dense.size(), [&](schema::Push::Builder b) {
    b.setWorker(worker);
    b.setSeq(seq);
    b.setStep(step);
    auto rs = b.initDense(2);
    size_t from[2] = {0, split}, to[2] = {split, dense.size()};
    for (unsigned i = 0; i < 2; ++i) {
      rs[i].setBegin(begin + from[i]);
      rs[i].setEnd(begin + to[i]);
      std::memcpy(rs[i].initValues((to[i] - from[i]) * 4).begin(), dense.data() + from[i],
                  (to[i] - from[i]) * 4);
    }
    b.initSparse();
  });
  auto d = decode(m);
  REQUIRE_MESSAGE(d, describe(d.error()));
  return std::move(*d);
}

}  // namespace

TEST_CASE("a BSP step's pushes summed in one pass give the bits of summing them first, for every optimizer") {
  // Values whose sum depends on the order of additions, and a negative zero.
  const std::vector<std::vector<float>> grads = {
    {1e8f, 0.1f, -0.0f, 3.0f}, {1.0f, 0.2f, -0.0f, -1e-8f}, {-1e8f, 0.3f, -0.0f, 7.5f}, {0.5f, -0.6f, 0.0f, 1e-3f}};
  for (auto kind : {optimizer_kind::sgd, optimizer_kind::momentum, optimizer_kind::adagrad, optimizer_kind::adam}) {
    for (uint32_t workers : {2u, 3u, 4u}) {
      CAPTURE(to_string(kind));
      CAPTURE(workers);
      auto cfg = config(consistency_kind::bsp, workers);
      cfg.optimizer.kind = kind;
      cfg.optimizer.lr = 0.01f;
      auto one_pass = fresh(cfg, {1.0f, 2.0f, 3.0f, 4.0f});
      auto general = fresh(cfg, {1.0f, 2.0f, 3.0f, 4.0f});
      for (uint64_t step = 0; step < 3; ++step)
        for (uint32_t w = 0; w < workers; ++w) {
          one_pass.offer(make_push(w, step + 1, step, 10, grads[w]));
          general.offer(w == 0 ? split_push(w, step + 1, step, 10, grads[w], 1)
                               : make_push(w, step + 1, step, 10, grads[w]));
        }
      CHECK(one_pass.bsp_clock() == 3);
      CHECK(general.bsp_clock() == 3);
      CHECK(same_bits(one_pass.dense(), general.dense()));
      for (size_t slot = 0; slot < slots_per_parameter(kind); ++slot)
        CHECK(same_bits(one_pass.dense_slot(slot), general.dense_slot(slot)));
      if (kind == optimizer_kind::sgd && workers == 3) {
        // 1e8 + 1 - 1e8 in float is 0: the step moves parameter 0 by nothing.
        float g0 = ((0.0f + grads[0][0]) + grads[1][0]) + grads[2][0];
        CHECK(g0 == 0.0f);
        CHECK(one_pass.dense()[0] == 1.0f);
      }
    }
  }
}
