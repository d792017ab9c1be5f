#pragma once
// connection_slots is the policy of a bounded server (keel's HTTP endpoints,
// actors/metrics/metrics_http.hpp): which connections hold its `capacity`
// slots, and which one gives way when a newer one waits to be accepted.
// A connection that has not sent a complete request yet, or whose response
// is written already (it lingers until the client closes), gives way to a
// newer one, oldest first, answered ones before waiting ones; one whose
// response is being written never does, so a request that got through (for
// the admin endpoint: one proving the cluster secret) keeps its capacity
// until it is answered. A connection is not taken for a newer one within
// `grace` of being accepted, which is its time to send its request: a flood
// of idle connections is then evicted at most `capacity` per `grace`, and a
// client queued behind it in the listen backlog (the kernel accepts in
// order) is served once the flood's connections ahead of it are (the
// node gate, actors/cluster/cluster_gate.hpp, likewise closes its oldest
// pending handshake for a newer one).
// A plain value: time is passed in; not thread-safe (the server's thread
// owns it).

#include <chrono>
#include <cstdint>
#include <map>

namespace keel {

class connection_slots {
 public:
  using clock = std::chrono::steady_clock;
  using slot_id = uint64_t;

  // `capacity` at least 1.
  connection_slots(size_t capacity, std::chrono::milliseconds grace)
      : capacity_(capacity), grace_(grace) {}

  // What to do with the next connection waiting to be accepted, at `now`.
  struct decision {
    enum class action {
      admit,             // a slot is free
      evict_then_admit,  // close `victim` (then release() it) and take its slot
      wait,              // every slot is held: accept nothing before `retry_at`, or
                         // before a slot is released or a response written
    } what = action::admit;
    slot_id victim = 0;
    clock::time_point retry_at = clock::time_point::max();  // for wait
  };
  decision next(clock::time_point now) const;

  // Holds a slot for a connection accepted at `now` (after next() said
  // admit, or its victim was released): waiting for its request.
  slot_id add(clock::time_point now);
  // Its request is complete and its response is being written: it keeps
  // its slot until written() or release().
  void writing(slot_id id);
  // Its response is written: it lingers until the client closes, and is
  // the first to give way.
  void written(slot_id id);
  // Its connection is closed: the slot is free. Releasing a slot not held
  // (released already) does nothing.
  void release(slot_id id);

  size_t open() const { return slots_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  enum class stage { waiting, writing, written };
  struct slot {
    clock::time_point accepted;
    stage at = stage::waiting;
  };
  size_t capacity_;
  std::chrono::milliseconds grace_;
  slot_id next_id_ = 1;
  std::map<slot_id, slot> slots_;  // by id: oldest first
};

}  // namespace keel
