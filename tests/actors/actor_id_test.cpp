// actor_id and link_id (actors/core/actor_id.hpp): their text round-trips
// and refuses anything else, they order and hash as values, and they cross
// CAF's serializer unchanged; a worker's config crosses it whole, as a
// remote spawn carries it.
#include <unordered_set>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/error.hpp>
#include <doctest/doctest.h>

#include "actors/core/actor_id.hpp"
#include "actors/core/fault_kind.hpp"
#include "actors/ps/worker.hpp"

using namespace keel;

namespace {

// Through CAF's binary serializer and back, as a message to another
// process (actor handles need the system as the context).
template <class T>
T round_trip(caf::actor_system& sys, T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  auto err = sink(x);
  REQUIRE_MESSAGE(!err, caf::to_string(err));
  T out;
  caf::binary_deserializer source{sys, buf};
  err = source(out);
  REQUIRE_MESSAGE(!err, caf::to_string(err));
  return out;
}

}  // namespace

TEST_CASE("every actor id prints as the name the tree, the CLI and the report use, and parses back") {
  std::vector<std::pair<actor_id, std::string>> cases = {
    {actor_id::shard(0), "shard:0"},      {actor_id::worker(12), "worker:12"},
    {actor_id::node(3), "node:3"},        {actor_id::checkpointer(), "checkpointer"},
    {actor_id::directory(), "directory"}, {actor_id::root(), "root"},
    {actor_id::shards(), "shards"},       {actor_id::workers(), "workers"},
    {actor_id::shard(4294967295u), "shard:4294967295"}};
  for (auto& [id, text] : cases) {
    CHECK(to_string(id) == text);
    auto back = parse_actor_id(text);
    REQUIRE_MESSAGE(back, text);
    CHECK(*back == id);
  }
}

TEST_CASE("text that names no actor does not parse as an actor id") {
  for (auto text : {"", "shard", "shard:", "shard:-1", "shard:+1", "shard:1x", "shard:4294967296",
                    "Shard:1", "root:0", "checkpointer:0", "parameter-server", "worker:0>shard:1", " shard:1"})
    CHECK_MESSAGE(!parse_actor_id(text), text);
}

TEST_CASE("an actor kind from a peer that no build knows prints as its number") {
  CHECK(to_string(static_cast<actor_kind>(200)) == "actor_kind(200)");
  CHECK(to_string(actor_id{static_cast<actor_kind>(200), 0}) == "actor_kind(200)");
}

TEST_CASE("actor ids compare, order by kind then index, and hash as values") {
  CHECK(actor_id::shard(1) == actor_id::shard(1));
  CHECK(actor_id::shard(1) != actor_id::worker(1));
  CHECK(actor_id::shard(2) < actor_id::shard(10));  // by number, not by text
  CHECK(actor_id::shard(10) < actor_id::worker(0));
  std::unordered_set<actor_id> set = {actor_id::shard(0), actor_id::shard(0), actor_id::worker(0)};
  CHECK(set.size() == 2);
  std::unordered_set<link_id> links = {{actor_id::worker(0), actor_id::shard(1)},
                                       {actor_id::shard(1), actor_id::worker(0)}};
  CHECK(links.size() == 2);
}

TEST_CASE("a link prints as its two ends joined by a greater-than sign and parses back, and anything else does not parse") {
  link_id l{actor_id::worker(0), actor_id::shard(1)};
  CHECK(to_string(l) == "worker:0>shard:1");
  auto back = parse_link_id("worker:0>shard:1");
  REQUIRE(back);
  CHECK(*back == l);
  CHECK(parse_link_id("directory>worker:3") == link_id{actor_id::directory(), actor_id::worker(3)});
  for (auto text : {"worker:0", "worker:0>", ">shard:1", "worker:0>shard:1>shard:2", "*>worker:1"})
    CHECK_MESSAGE(!parse_link_id(text), text);
}

TEST_CASE("actor ids, links and a worker's config cross CAF's serializer unchanged") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  CHECK(round_trip(sys, actor_id::worker(7)) == actor_id::worker(7));
  link_id l{actor_id::shard(2), actor_id::checkpointer()};
  CHECK(round_trip(sys, l) == l);
  worker_config w;
  w.core.worker = 3;
  w.core.epoch = 2;
  w.core.parts = {{{0, 4}, {4, 9}}, {{4, 8}, {9, 20}}};
  w.core.shard_names = {"shard:0", "shard:1"};
  w.core.total_steps = 77;
  w.core.rule = consistency_kind::ssp;
  w.core.windowed = true;
  w.core.dense_size = 99;  // the model's: not sent
  w.num_workers = 5;
  w.seed = 42;
  w.batch_size = 16;
  w.request_timeout = std::chrono::milliseconds(1234);
  w.retry_min = std::chrono::milliseconds(7);
  w.retry_max = std::chrono::milliseconds(900);
  auto out = round_trip(sys, w);
  CHECK(out.core.worker == 3);
  CHECK(out.core.epoch == 2);
  REQUIRE(out.core.parts.size() == 2);
  CHECK(out.core.parts[1].sparse.begin == 9);
  CHECK(out.core.parts[1].sparse.end == 20);
  CHECK(out.core.shard_names == w.core.shard_names);
  CHECK(out.core.total_steps == 77);
  CHECK(out.core.rule == consistency_kind::ssp);
  CHECK(out.core.windowed);
  CHECK(out.core.dense_size == 0);
  CHECK(out.num_workers == 5);
  CHECK(out.seed == 42);
  CHECK(out.batch_size == 16);
  CHECK(out.request_timeout == std::chrono::milliseconds(1234));
  CHECK(out.retry_min == std::chrono::milliseconds(7));
  CHECK(out.retry_max == std::chrono::milliseconds(900));
}

TEST_CASE("every fault kind prints as a plan spells it and parses back") {
  std::vector<fault_kind> kinds(std::begin(all_fault_kinds), std::end(all_fault_kinds));
  kinds.insert(kinds.end(), std::begin(network_fault_kinds), std::end(network_fault_kinds));
  kinds.insert(kinds.end(), std::begin(in_node_fault_kinds), std::end(in_node_fault_kinds));
  kinds.insert(kinds.end(), std::begin(membership_kinds), std::end(membership_kinds));
  for (auto k : kinds) {
    auto back = parse_fault_kind(to_string(k));
    REQUIRE_MESSAGE(back, to_string(k));
    CHECK(*back == k);
  }
  CHECK(std::string(to_string(fault_kind::raise)) == "throw");
  CHECK(!parse_fault_kind("raise"));
  CHECK(!parse_fault_kind("kill:shard:0"));
}
