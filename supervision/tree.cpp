// The embedding application's side of a supervision tree: starting the root
// with its services (waiting for it, or not), and blocking requests to
// supervisors.
#include <caf/actor_system.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "messages/errors.hpp"
#include "supervision/directory.hpp"
#include "supervision/events.hpp"
#include "supervision/supervisor.hpp"

namespace keel::supervision {

child_spec supervisor_child(supervisor_spec spec, restart_type restart) {
  child_spec c;
  c.id = spec.name;
  c.kind = child_kind::supervisor;
  c.shutdown = shutdown_policy::infinity();
  c.restart = restart;
  c.start = [spec = std::move(spec)](caf::actor_system& sys,
                                     const restart_context& ctx) -> caf::expected<caf::actor> {
    return spawn_supervisor(sys, spec, ctx);
  };
  return c;
}

namespace {

// Waits for the down_msg of an actor `self` monitors; an orderly stop is
// no error.
caf::error await_down(caf::scoped_actor& self, const caf::actor& who, caf::timespan timeout) {
  caf::error out = make_error(errc::timeout, "the supervision tree is still running");
  bool done = false;
  while (!done) {
    self->receive(
      [&](caf::down_msg& dm) {
        if (dm.source != who.address())
          return;
        done = true;
        out = dm.reason == caf::exit_reason::user_shutdown || dm.reason == caf::exit_reason::normal
                ? caf::error{}
                : std::move(dm.reason);
      },
      caf::after(timeout) >> [&] { done = true; });
  }
  return out;
}

}  // namespace

tree tree::launch(caf::actor_system& sys, supervisor_spec root, tree_options options) {
  tree t;
  t.sys_ = &sys;
  t.clock_ = options.clock ? options.clock : make_system_clock();
  bool own_directory = !options.directory;
  bool own_events = !options.events;
  t.directory_ = own_directory ? spawn_directory(sys) : options.directory;
  t.events_ = own_events ? spawn_event_stream(sys) : options.events;
  restart_context ctx;
  ctx.id = root.name;
  ctx.directory = t.directory_;
  ctx.events = t.events_;
  ctx.clock = t.clock_;
  auto name = root.name;
  t.root_ = spawn_supervisor(sys, std::move(root), ctx);
  // Services the tree made live exactly as long as its root.
  if (own_directory)
    caf::anon_send(t.directory_, follow_atom::value, t.root_);
  if (own_events)
    caf::anon_send(t.events_, follow_atom::value, t.root_);
  caf::anon_send(t.directory_, register_atom::value,
                 directory_update{name, 1, name_state::up, t.root_});
  return t;
}

caf::expected<tree> tree::start(caf::actor_system& sys, supervisor_spec root,
                                tree_options options, caf::timespan timeout) {
  auto t = launch(sys, std::move(root), std::move(options));
  // The root answers only after its init, i.e. after starting every child.
  caf::scoped_actor self{sys};
  self->monitor(t.root_);
  caf::error failed;
  self->request(t.root_, timeout, which_children_atom::value)
    .receive([](const std::vector<child_info>&) {}, [&](caf::error& e) { failed = std::move(e); });
  if (failed) {
    auto why = await_down(self, t.root_, timeout);
    return why ? why : failed;
  }
  return t;
}

tree::tree(tree&& other) noexcept
    : sys_(other.sys_), root_(std::move(other.root_)), directory_(std::move(other.directory_)),
      events_(std::move(other.events_)), clock_(std::move(other.clock_)) {
  other.root_ = caf::actor{};
}

tree& tree::operator=(tree&& other) noexcept {
  if (this != &other) {
    if (root_)
      caf::anon_send_exit(root_, caf::exit_reason::user_shutdown);
    sys_ = other.sys_;
    root_ = std::move(other.root_);
    directory_ = std::move(other.directory_);
    events_ = std::move(other.events_);
    clock_ = std::move(other.clock_);
    other.root_ = caf::actor{};
  }
  return *this;
}

tree::~tree() {
  if (root_)
    caf::anon_send_exit(root_, caf::exit_reason::user_shutdown);
}

caf::error tree::await(caf::timespan timeout) {
  caf::scoped_actor self{*sys_};
  self->monitor(root_);
  return await_down(self, root_, timeout);
}

caf::error tree::shutdown(caf::timespan timeout) {
  caf::anon_send_exit(root_, caf::exit_reason::user_shutdown);
  return await(timeout);
}

namespace {

template <class Result, class... Ts>
caf::expected<Result> ask(caf::actor_system& sys, const caf::actor& sup, caf::timespan timeout,
                          Ts&&... xs) {
  caf::scoped_actor self{sys};
  caf::expected<Result> out{caf::sec::request_timeout};
  self->request(sup, timeout, std::forward<Ts>(xs)...)
    .receive([&](Result& r) { out = std::move(r); }, [&](caf::error& e) { out = std::move(e); });
  return out;
}

}  // namespace

caf::expected<caf::actor> start_child(caf::actor_system& sys, const caf::actor& sup,
                                      const std::string& id, caf::timespan timeout) {
  return ask<caf::actor>(sys, sup, timeout, start_child_atom::value, id);
}

caf::expected<caf::actor> start_child(caf::actor_system& sys, const caf::actor& sup,
                                      child_spec spec, caf::timespan timeout) {
  return ask<caf::actor>(sys, sup, timeout, start_child_atom::value, std::move(spec));
}

caf::error terminate_child(caf::actor_system& sys, const caf::actor& sup, const std::string& id,
                           caf::timespan timeout) {
  auto r = ask<caf::ok_atom>(sys, sup, timeout, terminate_child_atom::value, id);
  return r ? caf::error{} : r.error();
}

caf::expected<std::vector<child_info>> which_children(caf::actor_system& sys,
                                                      const caf::actor& sup,
                                                      caf::timespan timeout) {
  return ask<std::vector<child_info>>(sys, sup, timeout, which_children_atom::value);
}

}  // namespace keel::supervision
