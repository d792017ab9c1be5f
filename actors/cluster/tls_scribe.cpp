#include "actors/cluster/tls_scribe.hpp"

#include <caf/io/middleman.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/interfaces.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/io/scribe.hpp>

namespace keel {

namespace {

namespace net = caf::io::network;

// stream_impl's protocol policy: CAF's event loop reads and writes, the
// session encrypts and decrypts.
struct tls_policy {
  explicit tls_policy(std::unique_ptr<tls_session> s) : session(std::move(s)) {}

  net::rw_state read_some(size_t& result, net::native_socket, void* buf, size_t len) {
    return moved(result, len == 0 ? 0 : session->read_some(buf, len), len);
  }

  net::rw_state write_some(size_t& result, net::native_socket, const void* buf, size_t len) {
    return moved(result, len == 0 ? 0 : session->write_some(buf, len), len);
  }

  bool try_accept(net::native_socket&, net::native_socket) { return false; }  // never a doorman

  // Records already decrypted are not in the socket: poll would not wake for them.
  // (Any: a read that finds less than the threshold just returns less.)
  bool must_read_more(net::native_socket, size_t) { return session->pending() > 0; }

  static net::rw_state moved(size_t& result, long n, size_t len) {
    result = n > 0 ? static_cast<size_t>(n) : 0;
    if (n < 0)
      return net::rw_state::failure;
    return len == 0 ? net::rw_state::indeterminate : net::rw_state::success;
  }

  std::unique_ptr<tls_session> session;
};

// Mirrors CAF's own scribe_impl, over tls_policy instead of plain TCP.
class tls_scribe final : public caf::io::scribe {
 public:
  tls_scribe(net::default_multiplexer& mpx, net::native_socket fd, std::unique_ptr<tls_session> s)
      : scribe(net::conn_hdl_from_socket(fd)), stream_(mpx, fd, std::move(s)) {}

  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (!launched_) {
      launched_ = true;
      stream_.start(this);
    }
  }
  void ack_writes(bool enable) override { stream_.ack_writes(enable); }
  std::vector<char>& wr_buf() override { return stream_.wr_buf(); }
  std::vector<char>& rd_buf() override { return stream_.rd_buf(); }
  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }
  void flush() override { stream_.flush(this); }
  std::string addr() const override {
    auto x = net::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string();
  }
  uint16_t port() const override {
    auto x = net::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }
  void add_to_loop() override { stream_.activate(this); }
  void remove_from_loop() override { stream_.passivate(); }

 private:
  bool launched_ = false;
  net::stream_impl<tls_policy> stream_;
};

}  // namespace

caf::io::scribe_ptr make_tls_scribe(caf::actor_system& sys, int fd, std::unique_ptr<tls_session> session) {
  auto& mpx = static_cast<net::default_multiplexer&>(sys.middleman().backend());
  session->read_ahead();
  return caf::make_counted<tls_scribe>(mpx, fd, std::move(session));
}

}  // namespace keel
