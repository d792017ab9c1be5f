// A supervisor's run-time requests (OTP's start_child, terminate_child,
// which_children). Each waits for a quiet moment between
// start and stop sequences, so it sees the children in a settled state.
#include <algorithm>

#include "messages/errors.hpp"
#include "supervision/supervisor_state.hpp"

namespace keel::supervision::detail {

namespace {

// Adds `spec` as the last child and starts it; `rp` hears its handle or why
// not (a failed start forgets the child again).
void add_child(supervisor_actor* self, child_spec spec, caf::typed_response_promise<caf::actor> rp) {
  auto& st = self->state;
  if (st.terminating) {
    rp.deliver(make_error(errc::shutting_down, "supervisor '" + st.spec.name + "' is stopping"));
    return;
  }
  if (find(self, spec.id) != nullptr) {
    rp.deliver(make_error(errc::invalid_argument,
                          "supervisor '" + st.spec.name + "' already has a child '" + spec.id + "'"));
    return;
  }
  auto id = spec.id;
  st.children.push_back(child_record{std::move(spec), {}, 0, child_status::idle, 0, {}});
  start_one(self, id, [=](caf::error err) mutable {
    if (err) {
      erase_child(self, id);
      rp.deliver(std::move(err));
      return;
    }
    rp.deliver(find(self, id)->handle);
  });
}

void remove_child(supervisor_actor* self, const std::string& id, caf::response_promise rp) {
  auto* c = find(self, id);
  if (self->state.terminating) {
    rp.deliver(make_error(errc::shutting_down,
                          "supervisor '" + self->state.spec.name + "' is stopping"));
    return;
  }
  if (c == nullptr) {
    rp.deliver(make_error(errc::not_found, "supervisor '" + self->state.spec.name +
                                               "' has no child '" + id + "'"));
    return;
  }
  for (auto& [ticket, ids] : self->state.pending_restarts)
    ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
  if (c->status != child_status::running)
    announce(self, *c, name_state::gone);
  stop_children(self, {id}, name_state::gone, [=]() mutable {
    erase_child(self, id);
    rp.deliver(caf::ok_atom::value);
  });
}

std::vector<child_info> list_children(supervisor_actor* self) {
  std::vector<child_info> out;
  for (const auto& c : self->state.children)
    out.push_back(child_info{c.spec.id, c.incarnation, c.status == child_status::running, c.handle});
  return out;
}

}  // namespace

void start_child_from_template(supervisor_actor* self, const std::string& id,
                               caf::typed_response_promise<caf::actor> rp) {
  when_idle(self, [=]() mutable {
    auto& st = self->state;
    if (st.spec.strategy != strategy::simple_one_for_one || st.spec.children.size() != 1) {
      rp.deliver(make_error(errc::invalid_argument,
                            "start_child(id) needs a simple_one_for_one supervisor with one "
                            "template child"));
      return;
    }
    auto spec = st.spec.children.front();
    spec.id = id;
    add_child(self, std::move(spec), rp);
  });
}

void start_child_from_spec(supervisor_actor* self, child_spec spec,
                           caf::typed_response_promise<caf::actor> rp) {
  when_idle(self, [=, spec = std::move(spec)]() mutable {
    if (self->state.spec.strategy == strategy::simple_one_for_one) {
      rp.deliver(make_error(errc::invalid_argument,
                            "a simple_one_for_one supervisor starts children by id"));
      return;
    }
    add_child(self, std::move(spec), rp);
  });
}

void terminate_child_request(supervisor_actor* self, const std::string& id,
                             caf::response_promise rp) {
  when_idle(self, [=]() mutable { remove_child(self, id, rp); });
}

void which_children_request(supervisor_actor* self,
                            caf::typed_response_promise<std::vector<child_info>> rp) {
  // Also how tree::start hears back only once the whole tree has started, or
  // learns that a root failing its start is going.
  when_idle(self, [=]() mutable {
    if (self->state.terminating)
      rp.deliver(make_error(errc::shutting_down,
                            "supervisor '" + self->state.spec.name + "' is stopping"));
    else
      rp.deliver(list_children(self));
  });
}

}  // namespace keel::supervision::detail
