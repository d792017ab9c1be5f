#pragma once
// held_deliveries carries out a link fault's decision
// (actors/faults/link_faults.hpp) inside the actor that sends or receives
// the message; link_ends (actors/faults/link_ends.hpp) is its user:
//   deliver    run the delivery now
//   drop       never run it (a request then times out at its sender)
//   duplicate  run it twice (or run the given duplicate, e.g. a second copy
//              sent as a plain message where CAF would discard a second
//              response)
//   delay      run it after the delay
//   reorder    hold it until the next delivery on the same link has run,
//              then run it; at most `reorder_window` later if none comes
// Held deliveries come back through a (link_release_atom, id) message the
// actor must route to release(). They die with the actor, as messages in a
// dead process's buffers do.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "actors/core/atoms.hpp"
#include "actors/faults/link_faults.hpp"

namespace keel {

constexpr std::chrono::milliseconds reorder_window{50};

class held_deliveries {
 public:
  template <class Self>
  void apply(Self* self, send_decision d, const std::string& link, std::function<void()> deliver,
             std::function<void()> duplicate = {}) {
    switch (d.action) {
      case send_action::deliver:
        deliver();
        delivered(link);
        return;
      case send_action::drop:
        return;
      case send_action::duplicate:
        deliver();
        if (duplicate)
          duplicate();
        else
          deliver();
        delivered(link);
        return;
      case send_action::delay:
      case send_action::reorder: {
        bool reorder = d.action == send_action::reorder;
        auto id = next_++;
        held_.emplace(id, held{link, reorder, std::move(deliver)});
        auto wait = reorder ? reorder_window : std::chrono::milliseconds(d.delay_ms);
        self->delayed_send(self, wait, link_release_atom::value, id);
        return;
      }
    }
  }

  // A delivery on `link` has run: deliveries reordered behind it follow.
  void delivered(const std::string& link);

  // Runs the delivery held under `id`, if it still is.
  void release(uint64_t id);

 private:
  struct held {
    std::string link;
    bool reorder;
    std::function<void()> run;
  };
  uint64_t next_ = 0;
  std::map<uint64_t, held> held_;
};

}  // namespace keel
