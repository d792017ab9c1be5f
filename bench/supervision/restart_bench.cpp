// Restart latency: the time from a child's crash until its new incarnation
// answers a call made through the directory, over many crashes, for a
// stateless child and for children restored from a large in-memory snapshot
// (adopted by reference, or copied into the child's own pooled buffer). The
// ceiling printed beside them is a plain copy of the snapshot's bytes into
// the same warm buffer, measured in the same run.
//
// usage: restart_bench [crashes=1000] [snapshot_mb=100]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "messages/errors.hpp"
#include "supervision/directory.hpp"
#include "supervision/supervisor.hpp"

using namespace keel;
using namespace keel::supervision;
using steady = std::chrono::steady_clock;

namespace {

using bytes = std::vector<char>;
using crash_atom = caf::atom_constant<caf::atom("b_crash")>;

// Hands out one reusable buffer: restoring must not pay for fresh pages on
// every restart (page faults dominate on these machines, see CAF017.md).
struct buffer_pool {
  std::mutex mu;
  std::vector<std::unique_ptr<bytes>> free;
  size_t allocations = 0;

  std::shared_ptr<bytes> acquire(size_t n) {
    std::unique_ptr<bytes> b;
    {
      std::lock_guard<std::mutex> guard(mu);
      if (!free.empty()) {
        b = std::move(free.back());
        free.pop_back();
      }
    }
    if (!b) {
      b = std::make_unique<bytes>(n, 0);
      ++allocations;
    }
    return std::shared_ptr<bytes>(b.release(), [this](bytes* p) {
      std::lock_guard<std::mutex> guard(mu);
      free.emplace_back(p);
    });
  }
};

enum class restore { none, by_reference, by_copy };

struct child_state {
  std::shared_ptr<const bytes> adopted;
  std::shared_ptr<bytes> own;
};

caf::behavior child(caf::stateful_actor<child_state>* self, restart_context ctx, restore mode,
                    buffer_pool* pool) {
  self->set_exception_handler([](std::exception_ptr&) -> caf::error {
    return caf::make_error(caf::sec::runtime_error, "injected crash");
  });
  if (auto snap = ctx.from.as<bytes>()) {
    if (mode == restore::by_reference) {
      self->state.adopted = snap;
    } else if (mode == restore::by_copy) {
      self->state.own = pool->acquire(snap->size());
      std::memcpy(self->state.own->data(), snap->data(), snap->size());
    }
  }
  auto inc = ctx.incarnation;
  return {
    [=](caf::ping_atom) { return caf::make_message(inc, caf::actor_cast<caf::actor>(self)); },
    [=](crash_atom) -> caf::message { throw std::runtime_error("crash"); },
  };
}

struct figures {
  double median_us;
  double p99_us;
};

figures summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[std::min(us.size() - 1, static_cast<size_t>(q * us.size()))]; };
  return {at(0.5), at(0.99)};
}

double micros(steady::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// Crashes the child `crashes` times; each sample is crash -> answer from the
// next incarnation through the directory.
figures measure(caf::actor_system& sys, restore mode, std::shared_ptr<const bytes> snap,
                buffer_pool& pool, int crashes) {
  child_spec c;
  c.id = "child";
  c.start = [mode, &pool](caf::actor_system& s, const restart_context& ctx)
      -> caf::expected<caf::actor> { return s.spawn(child, ctx, mode, &pool); };
  if (snap)
    c.snapshots = [snap](const std::string&) {
      return std::vector<snapshot>{snapshot::of("in-memory", snap)};
    };
  supervisor_spec spec;
  spec.name = "bench";
  spec.max_restarts = crashes + 10;
  spec.period = std::chrono::seconds(1);
  spec.children.push_back(c);
  auto t = tree::start(sys, spec);
  if (!t) {
    std::fprintf(stderr, "tree failed to start: %s\n", describe(t.error()).c_str());
    std::exit(1);
  }
  caf::scoped_actor self{sys};
  auto call = [&](uint64_t& inc, caf::actor& handle) {
    bool ok = false;
    self->request(t->directory(), std::chrono::seconds(10), call_atom::value, std::string{"child"},
                  caf::timespan{std::chrono::seconds(5)}, caf::make_message(caf::ping_atom::value))
      .receive([&](uint64_t i, caf::actor& h) { inc = i, handle = std::move(h), ok = true; },
               [&](caf::error& e) { std::fprintf(stderr, "call failed: %s\n", describe(e).c_str()); });
    if (!ok)
      std::exit(1);
  };
  uint64_t inc = 0;
  caf::actor handle;
  call(inc, handle);
  std::vector<double> samples;
  samples.reserve(crashes);
  for (int i = 0; i < crashes; ++i) {
    auto before = inc;
    auto t0 = steady::now();
    self->send(handle, crash_atom::value);
    call(inc, handle);
    samples.push_back(micros(steady::now() - t0));
    if (inc != before + 1) {
      std::fprintf(stderr, "expected incarnation %llu, got %llu\n",
                   static_cast<unsigned long long>(before + 1), static_cast<unsigned long long>(inc));
      std::exit(1);
    }
  }
  if (auto err = t->shutdown(std::chrono::seconds(10))) {
    std::fprintf(stderr, "shutdown: %s\n", describe(err).c_str());
    std::exit(1);
  }
  return summarize(samples);
}

// The ceiling: copy the snapshot into a warm buffer, as the copying child does.
figures copy_ceiling(const bytes& snap, buffer_pool& pool, int rounds) {
  auto dest = pool.acquire(snap.size());
  std::vector<double> samples;
  for (int i = 0; i < rounds; ++i) {
    auto t0 = steady::now();
    std::memcpy(dest->data(), snap.data(), snap.size());
    samples.push_back(micros(steady::now() - t0));
  }
  return summarize(samples);
}

void print(const char* what, figures f) {
  std::printf("  %-44s median %10.1f us   p99 %10.1f us\n", what, f.median_us, f.p99_us);
}

}  // namespace

int main(int argc, char** argv) {
  int crashes = argc > 1 ? std::atoi(argv[1]) : 1000;
  size_t mb = argc > 2 ? static_cast<size_t>(std::atoll(argv[2])) : 100;
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 2);
  caf::actor_system sys{cfg};
  buffer_pool pool;
  auto snap = std::make_shared<bytes>(mb << 20);
  for (size_t i = 0; i < snap->size(); i += 4096)
    (*snap)[i] = static_cast<char>(i / 4096);  // touch every page once, up front
  std::shared_ptr<const bytes> frozen = snap;

  std::printf("restart latency: crash -> the new incarnation answers a call through the "
              "directory, %d crashes each\n", crashes);
  auto stateless = measure(sys, restore::none, nullptr, pool, crashes);
  auto by_ref = measure(sys, restore::by_reference, frozen, pool, crashes);
  auto by_copy = measure(sys, restore::by_copy, frozen, pool, crashes);
  auto ceiling = copy_ceiling(*frozen, pool, std::max(20, crashes / 10));
  print("stateless child", stateless);
  auto label = std::to_string(mb) + " MB snapshot, adopted by reference";
  print(label.c_str(), by_ref);
  label = std::to_string(mb) + " MB snapshot, copied into own buffer";
  print(label.c_str(), by_copy);
  label = "ceiling: memcpy " + std::to_string(mb) + " MB into a warm buffer";
  print(label.c_str(), ceiling);
  std::printf(
      "  ratio, copied into own buffer / memcpy ceiling (medians): %.2f (the stateless and\n"
      "  by-reference restarts copy nothing, so the memcpy is no ceiling for them)\n",
      by_copy.median_us / ceiling.median_us);
  std::printf("  (restore buffers allocated: %zu; every other restart reused one)\n",
              pool.allocations);
  return 0;
}
