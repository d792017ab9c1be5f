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
#include "actors/ps/parameter_shard.hpp"
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
struct chain_files {
  test::temp_dir dir;
  shard_config cfg = table_config_of(consistency_kind::asp, 1);
  std::vector<snapshot_ref> refs;  // newest first: 3, 2
  std::vector<uint64_t> versions;  // the shard's version at 1, 2, 3

  chain_files() {
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

caf::expected<caf::actor> restart(caf::actor_system& sys, const chain_files& f) {
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
  chain_files f;
  auto s = restart(*a.sys, f);
  REQUIRE_MESSAGE(s, describe(s.error()));
  CHECK(version_of(*a.sys, *s) == 3);
}

TEST_CASE("a damaged newest delta falls back to the chain before it, and a damaged base leaves none") {
  actor_system_fixture a;
  chain_files f;
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
