// A shard actor restoring from its checkpoint files (actors/ps/
// parameter_shard.cpp): the newest ref's chain of a base and deltas, read one
// file at a time; a damaged delta falls back to the newest ref whose chain
// is intact, and a file found damaged is not read again for an older ref.
#include <filesystem>

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include "actors/core/atoms.hpp"
#include "actors/core/shard_delta.hpp"
#include "actors/core/shard_snapshot.hpp"
#include "actors/core/table_snapshot.hpp"
#include "actors/ps/parameter_shard.hpp"
#include "actors/ps/shard_standby.hpp"
#include "messages/buffer_pool.hpp"
#include "messages/register_types.hpp"
#include "shard_table_fixture.hpp"
#include "storage/file_damage.hpp"
#include "storage/file_io.hpp"
#include "storage/store_layout.hpp"
#include "job_fixture.hpp"

using namespace keel;
using namespace keel::shard_table_test;

namespace {

// Checkpoints 1 (a base), 2 and 3 (deltas) of one shard with a table, as
// files in a directory, and the refs a job would hand a restarted shard.
struct stored_chain {
  test::temp_dir dir;
  shard_config cfg = table_config_of(consistency_kind::asp, 1);
  std::vector<snapshot_ref> refs;  // newest first: 3, 2
  std::vector<uint64_t> versions;  // the shard's version at 1, 2, 3

  stored_chain() {
    auto core = fresh(cfg);
    auto k = keys_of_shard(1, 4);
    std::vector<chain_link> links;
    for (uint64_t id = 1; id <= 3; ++id) {
      core.offer(table_push(0, id, id - 1, {{0, dim, {k[id - 1], k[id]}, {0.5f, 0.25f, -0.5f, 1.0f}}}));
      auto snap = links.empty() ? snapshot_of(core, id, 0, {"run", "cfg", {}})
                                : delta_snapshot_of(core, id, 0, {"run", "cfg", {}},
                                                    {links.back().file, links.back().checkpoint, 1});
      REQUIRE_MESSAGE(snap, describe(snap.error()));
      core.clear_changes();
      auto e = write_snapshot_file(*posix_io(), dir.path(), snapshot_name(id, cfg.shard, 7), *snap, "t");
      REQUIRE_MESSAGE(e, describe(e.error()));
      e->chain = links;
      refs.insert(refs.begin(), snapshot_ref{dir.path().string(), id, id, *e, "run", "cfg"});
      links.push_back({id, e->file, e->bytes, e->crc32c});
      versions.push_back(core.version());
    }
    refs.pop_back();  // the job keeps the newest two
  }

  std::filesystem::path file_of(uint64_t id) const { return dir.path() / snapshot_name(id, cfg.shard, 7); }
};

struct actor_system_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  actor_system_fixture() {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

caf::expected<caf::actor> restart(caf::actor_system& sys, const stored_chain& f) {
  parameter_shard_config o;
  o.core = f.cfg;
  o.restore_from = f.refs;
  o.run_id = "run";
  o.config_hash = "cfg";
  parameter_shard_env env;
  env.table_rows = init_rows;
  return spawn_parameter_shard(sys, std::move(o), std::move(env));
}

uint64_t version_of(caf::actor_system& sys, const caf::actor& shard) {
  caf::scoped_actor self{sys};
  uint64_t applied = 0;
  self->request(shard, std::chrono::seconds(10), status_atom::value, uint32_t{0})
    .receive([&](uint64_t, uint64_t a, uint64_t, uint64_t) { applied = a; },
             [&](caf::error& e) { FAIL(describe(e)); });
  return applied;
}

}  // namespace

TEST_CASE("a restarted shard restores the newest ref's chain, base and deltas") {
  actor_system_fixture a;
  stored_chain f;
  auto s = restart(*a.sys, f);
  REQUIRE_MESSAGE(s, describe(s.error()));
  CHECK(version_of(*a.sys, *s) == 3);
}

TEST_CASE("a damaged newest delta falls back to the chain before it, and a damaged base leaves none") {
  actor_system_fixture a;
  stored_chain f;
  SUBCASE("the newest delta") {
    REQUIRE(!flip_bit(f.file_of(3), std::filesystem::file_size(f.file_of(3)) / 2));
    auto s = restart(*a.sys, f);
    REQUIRE_MESSAGE(s, describe(s.error()));
    CHECK(version_of(*a.sys, *s) == 2);
  }
  SUBCASE("a middle delta: no ref's chain is intact, and it is read once") {
    REQUIRE(!flip_bit(f.file_of(2), std::filesystem::file_size(f.file_of(2)) / 2));
    auto s = restart(*a.sys, f);
    REQUIRE_FALSE(s);  // no initial values to start fresh from
    auto text = describe(s.error());
    CHECK(text.find("checkpoint 3: damaged_snapshot: " + snapshot_name(2, 1, 7)) != std::string::npos);
    CHECK(text.find("checkpoint 2: damaged_snapshot: its chain holds " + snapshot_name(2, 1, 7) +
                    ", found damaged above") != std::string::npos);
  }
}

namespace {

parameter_shard_config start_config(const stored_chain& f, std::vector<snapshot_ref> refs) {
  parameter_shard_config o;
  o.core = f.cfg;
  o.restore_from = std::move(refs);
  o.run_id = "run";
  o.config_hash = "cfg";
  return o;
}

parameter_shard_env env_with(std::shared_ptr<shard_standby_store> standby = nullptr) {
  parameter_shard_env env;
  env.table_rows = init_rows;
  env.standby = std::move(standby);
  return env;
}

// The shard checkpoint `id` of `f` restores to, read from its files.
shard_core restored_at(const stored_chain& f, const snapshot_ref& ref) {
  auto memory = buffer_pool::create();
  auto links = ref.entry.chain.size() + 1;
  auto core = restore_chain(
    f.cfg, links, [&](size_t i) { return read_chain_link(*posix_io(), ref, i, *memory); }, verify_mode::checksums,
    init_rows);
  REQUIRE_MESSAGE(core, describe(core.error()));
  return std::move(*core);
}

void same_state(const shard_core& a, const shard_core& b) {
  CHECK(a.version() == b.version());
  CHECK(a.applied(0) == b.applied(0));
  REQUIRE(a.tables().size() == b.tables().size());
  CHECK(encode_table(a.tables()[0]) == encode_table(b.tables()[0]));
}

}  // namespace

TEST_CASE("a shard's pre-copy is taken by its start as it was, or with the deltas committed since applied") {
  stored_chain f;  // refs: 3, 2
  shard_standby_store store;
  SUBCASE("the newest ref is the pre-copy's") {
    auto bytes = store.prepare(start_config(f, {f.refs[0]}), env_with());
    REQUIRE_MESSAGE(bytes, describe(bytes.error()));
    uint64_t files = f.refs[0].entry.bytes;
    for (auto& l : f.refs[0].entry.chain) files += l.bytes;
    CHECK(*bytes == files);
    CHECK(store.size() == 1);
    CHECK(store.bytes() == files);
    std::string said;
    auto start = store.take(start_config(f, f.refs), env_with(), said);
    REQUIRE(start);
    CHECK(said == "took its pre-copy of checkpoint 3");
    same_state(start->core, restored_at(f, f.refs[0]));
    CHECK(start->chain.size() == 3);  // its next snapshot may be a delta on checkpoint 3
    CHECK(store.size() == 0);
    CHECK(store.taken() == 1);
  }
  SUBCASE("a delta was committed after the pre-copy") {
    REQUIRE(store.prepare(start_config(f, {f.refs[1]}), env_with()));
    std::string said;
    auto start = store.take(start_config(f, f.refs), env_with(), said);
    REQUIRE_MESSAGE(start, said);
    CHECK(said == "took its pre-copy of checkpoint 2 and 1 newer delta");
    CHECK(start->core.version() == 3);
    same_state(start->core, restored_at(f, f.refs[0]));
  }
  SUBCASE("through a shard's start (spawn_parameter_shard)") {
    actor_system_fixture a;
    auto standby = std::make_shared<shard_standby_store>();
    REQUIRE(standby->prepare(start_config(f, {f.refs[1]}), env_with()));
    auto s = spawn_parameter_shard(*a.sys, start_config(f, f.refs), env_with(standby));
    REQUIRE_MESSAGE(s, describe(s.error()));
    CHECK(standby->taken() == 1);
    CHECK(version_of(*a.sys, *s) == 3);
    caf::anon_send_exit(*s, caf::exit_reason::user_shutdown);
  }
}

TEST_CASE("a pre-copy is not taken by another config's or an older ref's start, nor when a newer delta is damaged, and is dropped either way") {
  stored_chain f;
  shard_standby_store store;
  std::string said;
  SUBCASE("another configuration") {
    REQUIRE(store.prepare(start_config(f, {f.refs[0]}), env_with()));
    auto other = start_config(f, f.refs);
    other.config_hash = "another";
    CHECK_FALSE(store.take(other, env_with(), said));
    CHECK(said == "its pre-copy of checkpoint 3 is of another configuration; restoring checkpoint 3");
  }
  SUBCASE("an older ref than the pre-copy's") {
    REQUIRE(store.prepare(start_config(f, {f.refs[0]}), env_with()));
    CHECK_FALSE(store.take(start_config(f, {f.refs[1]}), env_with(), said));
    CHECK(said == "its pre-copy of checkpoint 3 is newer than checkpoint 2, the one to restore; restoring checkpoint 2");
  }
  SUBCASE("the newer delta is damaged") {
    REQUIRE(store.prepare(start_config(f, {f.refs[1]}), env_with()));
    REQUIRE(!flip_bit(f.file_of(3), std::filesystem::file_size(f.file_of(3)) / 2));
    CHECK_FALSE(store.take(start_config(f, f.refs), env_with(), said));
    CHECK_MESSAGE(said.find("its pre-copy of checkpoint 2 did not extend to 3: damaged_snapshot") == 0, said);
  }
  SUBCASE("a pre-copy of another run's checkpoint, or of none, is refused") {
    auto ref = f.refs[0];
    ref.run_id = "an older run";
    auto r = store.prepare(start_config(f, {ref}), env_with());
    REQUIRE_FALSE(r);
    CHECK(describe(r.error()).find("another run's checkpoint") != std::string::npos);
    CHECK_FALSE(store.prepare(start_config(f, {}), env_with()));
  }
  CHECK(store.size() == 0);
  CHECK(store.taken() == 0);
}
