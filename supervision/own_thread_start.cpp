#include "supervision/own_thread_start.hpp"

#include <exception>
#include <memory>
#include <mutex>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include "messages/errors.hpp"
#include "supervision/protocol.hpp"

namespace keel::supervision {

namespace {

using run_start_atom = caf::atom_constant<caf::atom("sv_run")>;

// Whether the supervisor that asked is gone, and the child started for it.
// A supervisor killed while its start runs never adopts the child, and its
// own end kills only the children it adopted: so its end kills the child
// started for it, and a start that ends after it kills its child at once.
struct requester_watch {
  std::mutex mtx;
  bool gone = false;
  caf::actor_addr child;  // weak: the supervisor, once it adopts it, holds it
};

// Runs `start` once when asked, answers with its outcome and ends.
caf::behavior start_runner(caf::event_based_actor* self, start_function start, restart_context ctx) {
  return {
    [=](run_start_atom) {
      // Read before the promise, which takes the sender from the message.
      auto sender = self->current_sender();
      auto rp = self->make_response_promise<caf::actor>();
      auto watch = std::make_shared<requester_watch>();
      if (sender)
        sender->get()->attach_functor([watch] {
          std::lock_guard<std::mutex> guard(watch->mtx);
          watch->gone = true;
          if (auto child = caf::actor_cast<caf::actor>(watch->child))
            caf::anon_send_exit(child, caf::exit_reason::kill);
        });
      caf::expected<caf::actor> h = caf::actor{};
      try {
        h = start(self->system(), ctx);
      } catch (const std::exception& e) {
        h = make_error(errc::start_failed, std::string("the start function threw: ") + e.what());
      } catch (...) {
        h = make_error(errc::start_failed, "the start function threw");
      }
      if (h && *h) {
        std::lock_guard<std::mutex> guard(watch->mtx);
        if (watch->gone)
          caf::anon_send_exit(*h, caf::exit_reason::kill);
        else
          watch->child = h->address();
      }
      if (h)
        rp.deliver(std::move(*h));
      else
        rp.deliver(std::move(h.error()));
      self->quit();
      return rp;
    },
  };
}

}  // namespace

child_spec start_on_own_thread(child_spec spec, clock::duration timeout) {
  auto start = std::move(spec.start);
  spec.start = nullptr;
  spec.start_timeout = timeout;
  spec.start_pending = [start](caf::actor_system& sys,
                               const restart_context& ctx) -> caf::expected<pending_start> {
    if (!start)
      return make_error(errc::start_failed, "the spec has no start function");
    auto runner = sys.spawn<caf::detached>(start_runner, start, ctx);
    return pending_start{runner, caf::make_message(run_start_atom::value)};
  };
  return spec;
}

}  // namespace keel::supervision
