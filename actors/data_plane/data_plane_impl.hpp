#pragma once
// Internals of the data plane (actors/data_plane/data_plane.hpp) shared by its two
// translation units: data_plane.cpp (sockets, threads, the public class)
// and data_plane_actors.cpp (the forwarder and gateway actors). Not part of
// keel's API.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>

#include "actors/data_plane/data_plane.hpp"
#include "actors/data_plane/data_plane_wire.hpp"
#include "actors/net/rate_limited_log.hpp"
#include "messages/errors.hpp"
#include "messages/protocol.hpp"

namespace keel {

namespace dp_detail {

using dp_request_atom = caf::atom_constant<caf::atom("dp_req")>;     // (slot, shard, msg) to a gateway
using dp_reply_atom = caf::atom_constant<caf::atom("dp_reply")>;     // (slot, answer) to a forwarder
using dp_error_atom = caf::atom_constant<caf::atom("dp_error")>;     // (slot, text) to a forwarder
using dp_closed_atom = caf::atom_constant<caf::atom("dp_closed")>;   // (why) to a forwarder
using steady = std::chrono::steady_clock;

struct outgoing {
  dp::header h;
  frame_ptr f;  // or, for kind::error, the text
  std::string text;
};

// One TCP connection and its two threads: the writer drains `queue`, the
// reader delivers what arrives to `actor` (a forwarder for an outbound
// connection, a gateway for an inbound one).
struct connection {
  enum class phase { connecting, open, closed };

  bool outbound = false;
  std::string peer;  // node id: the route's (outbound) or the handshake's (inbound)
  std::string from;  // inbound: the peer's address, for refusals
  std::string host;  // outbound: where it connects
  uint16_t port = 0;
  std::string tls_name;  // outbound with TLS: the name the listener's certificate must state
  caf::actor actor;  // set before the threads start
  std::thread writer, reader;
  std::atomic<int> running{2};  // threads not finished yet

  std::mutex mtx;
  std::condition_variable cv;
  phase ph = phase::connecting;
  dp::socket_fd fd;
  std::shared_ptr<dp::link> io;  // the bytes on fd (through TLS when on); set with fd
  std::deque<outgoing> queue;
  std::string why;  // why it closed
  steady::time_point closed_at;

  std::string name() const {
    return "node " + (peer.empty() ? std::string("(not yet known)") : peer) +
           (outbound ? " at " + host + ":" + std::to_string(port) : std::string());
  }

  bool enqueue(outgoing o) {
    std::lock_guard<std::mutex> guard(mtx);
    if (ph == phase::closed)
      return false;
    queue.push_back(std::move(o));
    cv.notify_all();
    return true;
  }

  // False when the connection closed meanwhile (the socket is then dropped).
  bool adopt(dp::socket_fd s) {
    std::lock_guard<std::mutex> guard(mtx);
    if (ph == phase::closed)
      return false;
    fd = std::move(s);
    io = std::make_shared<dp::link>(fd.get());
    return true;
  }

  // Runs the TLS handshake on the socket (within `timeout`) and carries the
  // connection's bytes through it from then on. Empty on success, else why
  // the peer, or this process's certificate, was refused.
  std::string secure(const tls_context& ctx, tls_session::role r, std::chrono::milliseconds timeout) {
    int s = socket();
    auto session = tls_session::make(ctx, s, r, tls_name);
    if (!session)
      return describe(session.error());
    if ((*session)->handshake(timeout))
      return (*session)->failure();
    (*session)->read_ahead();  // every read of this link loops until it would block
    std::lock_guard<std::mutex> guard(mtx);
    io = std::make_shared<dp::link>(s, std::move(*session));
    return {};
  }

  bool open() {
    std::lock_guard<std::mutex> guard(mtx);
    if (ph != phase::connecting)
      return false;
    ph = phase::open;
    cv.notify_all();
    return true;
  }

  // Waits until the handshake ended; true when it succeeded.
  bool wait_open() {
    std::unique_lock<std::mutex> lk(mtx);
    cv.wait(lk, [&] { return ph != phase::connecting; });
    return ph == phase::open;
  }

  bool is_closed(steady::time_point* when = nullptr) {
    std::lock_guard<std::mutex> guard(mtx);
    if (when)
      *when = closed_at;
    return ph == phase::closed;
  }

  // True for the call that closed it. Wakes both threads.
  bool close(const std::string& reason) {
    std::lock_guard<std::mutex> guard(mtx);
    if (ph == phase::closed)
      return false;
    ph = phase::closed;
    why = reason;
    closed_at = steady::now();
    queue.clear();
    fd.shutdown();
    cv.notify_all();
    return true;
  }

  // The next item to write; false once closed.
  bool next(outgoing& o) {
    std::unique_lock<std::mutex> lk(mtx);
    cv.wait(lk, [&] { return ph == phase::closed || !queue.empty(); });
    if (ph == phase::closed)
      return false;
    o = std::move(queue.front());
    queue.pop_front();
    return true;
  }

  int socket() {
    std::lock_guard<std::mutex> guard(mtx);
    return fd.get();
  }

  std::shared_ptr<dp::link> bytes() {
    std::lock_guard<std::mutex> guard(mtx);
    return io;
  }
};

using connection_ptr = std::shared_ptr<connection>;

}  // namespace dp_detail

struct data_plane::impl {
  using connection = dp_detail::connection;
  using connection_ptr = dp_detail::connection_ptr;
  using steady = dp_detail::steady;

  impl(caf::actor_system& s, data_plane_config c)
    : sys(s),
      cfg(std::move(c)),
      node(to_string(s.node())),
      refusals([this](const std::string& line) { log(line); }, 20, std::chrono::milliseconds(1000),
               "refused connections") {}

  caf::actor_system& sys;
  data_plane_config cfg;
  std::string node;
  uint16_t port = 0;
  dp::socket_fd listener;
  std::thread acceptor;

  std::mutex mtx;
  bool stopping = false;
  struct route_to {
    std::string host;
    uint16_t port = 0;
    std::string tls_name;
  };
  std::map<std::string, route_to> routes;                          // node -> where, who
  std::map<caf::node_id, connection_ptr> out;                      // node -> its connection
  std::vector<connection_ptr> all;                                 // every connection with threads
  std::unordered_map<caf::actor_id, caf::actor> served;

  std::atomic<uint64_t> connections_out{0}, connections_in{0}, refused{0}, requests_out{0}, requests_in{0},
    bytes_out{0}, bytes_in{0};

  // Refusals of strangers (failed handshakes, the connection limit): a
  // flood costs 20 log lines a second and a count (actors/net/rate_limited_log.hpp).
  std::mutex refusal_mtx;
  rate_limited_log refusals;
  void log_refusal(const connection& c, const std::string& why) {
    std::lock_guard<std::mutex> guard(refusal_mtx);
    refusals("refused a connection from " + c.from + " to port " + std::to_string(port) + ": " + why, steady::now());
  }

  void log(const std::string& line) const {
    if (cfg.log)
      cfg.log(line);
    else
      std::cerr << "keel data plane: " + line + "\n";
  }

  caf::actor lookup(uint64_t id) {
    std::lock_guard<std::mutex> guard(mtx);
    auto it = served.find(id);
    return it == served.end() ? caf::actor{} : it->second;
  }

  // Closes `c` and tells its actor; the connection's threads end soon after.
  void close(const connection_ptr& c, const std::string& why) {
    if (!c->close(why))
      return;
    if (c->outbound)
      caf::anon_send(c->actor, dp_detail::dp_closed_atom::value, why);
    else
      caf::anon_send_exit(c->actor, caf::exit_reason::user_shutdown);
  }

  // Joins the threads of connections that closed and whose threads have
  // finished (a thread still running may be waiting for `mtx`).
  void reap_locked() {
    for (auto it = all.begin(); it != all.end();) {
      auto& c = *it;
      if (c->running.load() != 0) {
        ++it;
        continue;
      }
      c->writer.join();
      c->reader.join();
      it = all.erase(it);
    }
  }

  void start_threads(const connection_ptr& c);
  bool start(const connection_ptr& c);
  void write_loop(const connection_ptr& c);
  void read_requests(const connection_ptr& c);
  void read_answers(const connection_ptr& c);
  void accept_loop();
};

namespace dp_detail {

// The actor a worker's requests to one node go through (outbound).
caf::actor spawn_forwarder(caf::actor_system& sys, std::weak_ptr<connection> c,
                           std::weak_ptr<data_plane::impl> owner, std::string peer);
// The actor that asks local shards on behalf of one inbound connection.
caf::actor spawn_gateway(caf::actor_system& sys, std::weak_ptr<connection> c, std::chrono::milliseconds timeout);

}  // namespace dp_detail

}  // namespace keel
