// The chaos suite's longer tier: thousands of seeded fault plans against
// probe runs, and MNIST runs under faults, each checked for keel's promises
// (actors/chaos/chaos.hpp). Not in the default CI run: `ctest -R '(slow)'`, or the
// same through `keel chaos --seeds N`. It prints the figures the note
// reports: faults by kind, recoveries, lost updates, recovery times.
#include <algorithm>
#include <map>

#include "job_fixture.hpp"
#include "models/mnist_data.hpp"
#include "models/model_registry.hpp"

using namespace keel;
using namespace keel::test;

namespace {

void summarise(const std::vector<chaos_run>& runs) {
  uint64_t faults = 0, planned = 0, recoveries = 0;
  int64_t lost = 0;
  std::map<std::string, std::vector<int64_t>> times;
  for (auto& r : runs) {
    faults += r.faults;
    planned += r.planned;
    recoveries += r.recoveries;
    lost += r.lost_updates;
    for (auto& [kind, us] : r.recovery_us) times[kind].push_back(us);
    CHECK_MESSAGE(r.ok(), "seed " << r.seed << ": " << r.problem << "\n  replay: --faults '" << r.plan << "'");
  }
  MESSAGE(runs.size() << " seeds, " << faults << " of " << planned << " planned faults injected, " << recoveries << " recoveries, "
                      << lost << " lost updates");
  for (auto& [kind, v] : times) {
    std::sort(v.begin(), v.end());
    MESSAGE("recovery of " << kind << ": n=" << v.size() << " median " << v[v.size() / 2] / 1000.0
                           << " ms, p99 " << v[v.size() * 99 / 100] / 1000.0 << " ms");
  }
  CHECK(lost == 0);
  CHECK(recoveries > 0);
  CHECK(faults > 0);  // how many of the planned depends on timing (chaos_test.cpp says why)
}

chaos_options probe_options(const temp_dir& dir, consistency rule) {
  return chaos_setup(probe_with_table(), dir, rule, 60, 10, 5, std::chrono::milliseconds(200));
}

}  // namespace

TEST_CASE("2000 seeded fault plans against BSP probe runs, 5 faults each") {
  temp_dir dir;
  summarise(run_chaos(probe_options(dir, {consistency_kind::bsp, 0}), 10000, 2000));
}

TEST_CASE("300 seeded fault plans against ASP and SSP probe runs") {
  temp_dir dir;
  summarise(run_chaos(probe_options(dir, {consistency_kind::asp, 0}), 20000, 150));
  summarise(run_chaos(probe_options(dir, {consistency_kind::ssp, 2}), 30000, 150));
}

TEST_CASE("40 seeded fault plans against MNIST softmax runs in BSP end bit-identical") {
  temp_dir dir;
  model_options mo;
  mo.data_dir = default_data_dir();
  auto m = make_model("mnist-softmax", mo);
  REQUIRE_MESSAGE(m, describe(m.error()));
  auto o = probe_options(dir, {consistency_kind::bsp, 0});
  o.base.training_model = *m;
  o.base.training.optimizer.lr = 0.05f;
  o.base.training.batch_size = 32;
  summarise(run_chaos(o, 40000, 40));
}
