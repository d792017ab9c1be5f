// The steps of an application's own training loop (worker_env::channel,
// actors/core/client_channel.hpp): where the worker would ask its model for
// the batch's keys and for the gradient, it asks the channel, and waits for
// a wake (client_wake_atom) when the application has not asked yet. Pulls,
// pushes, the replay log and recovery stay worker.cpp's and
// worker_recovery.cpp's.
#include "actors/core/atoms.hpp"
#include "actors/core/client_channel.hpp"
#include "actors/ps/worker_state.hpp"

namespace keel::worker_detail {

void attach_client(worker_actor* self) {
  auto& st = self->state;
  // A weak address: the channel outlives this incarnation, which it must
  // not keep alive.
  st.channel_token = st.env.channel->attach([who = self->address()] {
    if (auto h = caf::actor_cast<caf::actor>(who))
      caf::anon_send(h, client_wake_atom::value);
  });
}

void client_keys(worker_actor* self) {
  auto& st = self->state;
  auto keys = st.env.channel->ready_at(st.channel_token, st.core.step());
  if (!keys) {
    st.awaiting = worker_state::client_wait::keys;
    return;
  }
  st.awaiting = worker_state::client_wait::none;
  st.model_keys = std::move(keys->sparse);
  st.table_keys = std::move(keys->tables);
  st.core.begin_pull(st.model_keys, st.table_keys);
  pull_step(self);
}

void client_gradient(worker_actor* self) {
  auto& st = self->state;
  if (!st.env.channel->pulled(st.channel_token, st.core.step(), st.core.parameters(), st.grad)) {
    st.awaiting = worker_state::client_wait::gradient;
    return;
  }
  st.awaiting = worker_state::client_wait::none;
  push_gradient(self);
}

void client_wake(worker_actor* self) {
  auto& st = self->state;
  if (!st.env.channel || st.core.phase() == worker_phase::halted)
    return;
  switch (st.awaiting) {
    case worker_state::client_wait::keys:
      return client_keys(self);
    case worker_state::client_wait::gradient:
      if (st.env.channel->gradient(st.channel_token, st.core.step(), st.grad)) {
        st.awaiting = worker_state::client_wait::none;
        push_gradient(self);
      }
      return;
    case worker_state::client_wait::none:
      return;
  }
}

}  // namespace keel::worker_detail
