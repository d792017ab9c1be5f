#pragma once
// What every supervision test shares: an actor system, a manual clock, an
// event stream and directory the test subscribes to before a tree starts, a
// way to wait for the next event matching a predicate (with a timeout, never
// a sleep), and small child actors whose behaviour a test controls.

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include "messages/errors.hpp"
#include "supervision/directory.hpp"
#include "supervision/events.hpp"
#include "supervision/supervisor.hpp"

namespace keel::supervision::testing {

using namespace std::chrono_literals;

using crash_atom = caf::atom_constant<caf::atom("t_crash")>;  // child throws
using quit_atom = caf::atom_constant<caf::atom("t_quit")>;    // child exits normally
using who_atom = caf::atom_constant<caf::atom("t_who")>;      // -> (id, incarnation, state)
using ignored_atom = caf::atom_constant<caf::atom("t_ignored")>;  // a stubborn child saw shutdown

constexpr auto wait_budget = std::chrono::seconds(10);

struct config_holder {
  caf::actor_system_config cfg;
  config_holder() { cfg.set("scheduler.max-threads", 2); }
};

struct fixture : config_holder {
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::shared_ptr<manual_clock> clk = std::make_shared<manual_clock>();
  caf::actor events = spawn_event_stream(sys);
  caf::actor directory = spawn_directory(sys);
  std::vector<event> seen;  // every event received so far, in order

  fixture() {
    self->request(events, wait_budget, subscribe_atom::value)
      .receive([](caf::ok_atom) {}, [](caf::error& e) { FAIL(caf::to_string(e)); });
  }

  ~fixture() {
    self->send_exit(events, caf::exit_reason::user_shutdown);
    self->send_exit(directory, caf::exit_reason::user_shutdown);
  }

  tree_options options() { return tree_options{clk, directory, events}; }

  tree start(supervisor_spec spec) {
    auto t = tree::start(sys, std::move(spec), options());
    REQUIRE_MESSAGE(t, describe(t.error()));
    return std::move(*t);
  }

  // The next event for which `match` holds; events before it are recorded
  // in `seen` and skipped. Fails the test if none comes within the budget.
  event expect(const std::function<bool(const event&)>& match) {
    for (;;) {
      event got;
      bool timed_out = false;
      self->receive([&](event& e) { got = std::move(e); },
                    caf::after(wait_budget) >> [&] { timed_out = true; });
      if (timed_out) {
        FAIL("no matching event within the budget");
        return {};
      }
      seen.push_back(got);
      if (match(got))
        return got;
    }
  }

  event expect(event_kind kind, const std::string& child) {
    return expect([&](const event& e) { return e.kind == kind && e.child == child; });
  }

  // The next `n` events of `kind` (others skipped), in order.
  std::vector<event> expect_n(event_kind kind, size_t n) {
    std::vector<event> out;
    while (out.size() < n)
      out.push_back(expect([&](const event& e) { return e.kind == kind; }));
    return out;
  }

  caf::actor handle_of(const std::string& name) {
    auto u = lookup(sys, directory, name);
    REQUIRE_MESSAGE(u, describe(u.error()));
    REQUIRE(u->state == name_state::up);
    return u->handle;
  }

  // Asks a child who it is: (id, incarnation, state value).
  std::tuple<std::string, uint64_t, int> who(const caf::actor& child) {
    std::tuple<std::string, uint64_t, int> out{"", 0, -1};
    self->request(child, wait_budget, who_atom::value)
      .receive([&](std::string& id, uint64_t inc, int v) { out = {id, inc, v}; },
               [&](caf::error& e) { FAIL(caf::to_string(e)); });
    return out;
  }

  void crash(const std::string& name) { self->send(handle_of(name), crash_atom::value); }

  std::vector<child_info> children_of(const caf::actor& sup) {
    auto cs = which_children(sys, sup);
    REQUIRE_MESSAGE(cs, describe(cs.error()));
    return *cs;
  }
};

// A worker answers who_atom with its id, incarnation and the int it was
// restored from (-1 when fresh), throws on crash_atom, exits normally on
// quit_atom. It may be told to ignore exit signals (a stubborn child).
struct worker_options {
  bool stubborn = false;
  bool crash_on_init = false;
  caf::actor notify;  // told ignored_atom when a stubborn worker ignores an exit
};

inline caf::behavior worker(caf::event_based_actor* self, restart_context ctx, worker_options o) {
  self->set_exception_handler([](std::exception_ptr& p) -> caf::error {
    try {
      std::rethrow_exception(p);
    } catch (const std::exception& e) {
      return caf::make_error(caf::sec::runtime_error, e.what());
    }
  });
  if (o.stubborn)
    self->set_exit_handler([=](caf::exit_msg&) {
      if (o.notify)
        self->send(o.notify, ignored_atom::value, ctx.id);
    });
  if (o.crash_on_init)
    throw std::runtime_error("crash while initialising");
  int restored = -1;
  if (auto v = ctx.from.as<int>())
    restored = *v;
  return {
    [=](who_atom) { return caf::make_message(ctx.id, ctx.incarnation, restored); },
    [=](crash_atom) -> caf::message { throw std::runtime_error("injected crash"); },
    [=](quit_atom) { self->quit(); },
  };
}

inline child_spec worker_spec(const std::string& id, restart_type r = restart_type::permanent,
                              worker_options o = {}) {
  child_spec c;
  c.id = id;
  c.restart = r;
  c.start = [o](caf::actor_system& sys, const restart_context& ctx) -> caf::expected<caf::actor> {
    return sys.spawn(worker, ctx, o);
  };
  return c;
}

inline supervisor_spec sup_spec(const std::string& name, strategy s, std::vector<child_spec> cs,
                                int max_restarts = 10) {
  supervisor_spec spec;
  spec.name = name;
  spec.strategy = s;
  spec.max_restarts = max_restarts;
  spec.children = std::move(cs);
  return spec;
}

}  // namespace keel::supervision::testing
