// The application's requests (job.hpp: stop, read, rows and table, kill,
// move, inject): each waits while the tree is (re)started, then answers
// from the running tree, or fails once the job is no longer running.
#include <optional>
#include <string>
#include <vector>

#include "actors/job/job_controller.hpp"
#include "actors/job/row_read.hpp"
#include "messages/errors.hpp"

namespace keel {

namespace {

// The index of table `name` in the model's layout, or not_found naming it.
caf::expected<uint32_t> table_index(controller_actor* self, const std::string& name) {
  auto& tables = self->state.cfg.training_model->layout().tables();
  for (uint32_t t = 0; t < tables.size(); ++t)
    if (tables[t].name == name)
      return t;
  return make_error(errc::not_found, "model " + self->state.cfg.training_model->name() +
                                       " has no embedding table '" + name + "'");
}

}  // namespace

void stop_now(controller_actor* self, caf::response_promise rp) {
  auto& run = self->state.run;
  switch (run.core.stop()) {
    case controller_action::hold:
      run.deferred.push_back([=] { stop_now(self, rp); });
      return;
    case controller_action::stop_tree:
      run.stoppers.push_back(rp);
      stop_tree_and_drain(self, [self] {
        end_job(self, make_error(errc::shutting_down, "the job was stopped"));
      });
      return;
    case controller_action::join_stop:
      run.stoppers.push_back(rp);  // answered when it ends
      return;
    default:
      rp.deliver(not_running());
  }
}

void read_now(controller_actor* self, caf::response_promise rp) {
  if (!admitted(self, rp, [=] { read_now(self, rp); }))
    return;
  read_parameters(self, false, [rp](caf::expected<parameters_read> r) mutable {
    if (!r)
      return rp.deliver(r.error());
    rp.deliver(job::parameters_now{std::move(r->dense), std::move(r->sparse)});
  });
}

// job::rows (with `keys`) and job::table (without), once the run runs.
void table_request(controller_actor* self, std::string table, std::optional<std::vector<uint64_t>> keys,
                   caf::response_promise rp) {
  if (!admitted(self, rp, [=] { table_request(self, table, keys, rp); }))
    return;
  auto t = table_index(self, table);
  if (!t)
    return rp.deliver(t.error());
  auto answer = [rp](auto r) mutable {
    if (!r)
      return rp.deliver(r.error());
    rp.deliver(std::move(*r));
  };
  if (keys)
    read_rows(self, *t, std::move(*keys), answer);
  else
    read_table(self, *t, answer);
}

void kill_request(controller_actor* self, const fault& f, caf::response_promise rp) {
  if (self->state.run.core.kill() == controller_action::hold)
    self->state.run.deferred.push_back([=] { kill_request(self, f, rp); });
  else
    kill_now(self, f, rp);
}

void move_request(controller_actor* self, const std::string& name, const std::string& why,
                  caf::response_promise rp) {
  if (!admitted(self, rp, [=] { move_request(self, name, why, rp); }))
    return;
  move_now(self, name, why, rp);
}

void inject_request(controller_actor* self, const fault& f, caf::response_promise rp) {
  if (!admitted(self, rp, [=] { inject_request(self, f, rp); }))
    return;
  inject_now(self, f, rp);
}

}  // namespace keel
