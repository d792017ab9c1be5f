#pragma once
// The data plane's bytes on a socket (see actors/data_plane/data_plane.hpp for the
// format and the handshake): blocking helpers for one connection, no actors.
// Every function that reads trusts nothing it reads; errors name what was
// wrong. Used by actors/data_plane/data_plane.cpp and by the tests that play a peer.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <memory>
#include <mutex>

#include "actors/net/cluster_secret.hpp"
#include "actors/net/tls.hpp"
#include "messages/frame.hpp"

struct iovec;

namespace keel::dp {

enum class kind : uint32_t {
  push = 1,        // a push_msg for target
  pull = 2,        // a pull_request_msg for target
  push_ack = 3,    // the answer to slot: a push_ack_msg
  pull_reply = 4,  // the answer to slot: a pull_reply_msg
  error = 5,       // the answer to slot: an error text
};

constexpr uint32_t header_magic = 0x3150444b;  // "KDP1" little-endian
constexpr size_t header_bytes = 32;
constexpr size_t max_error_text = 4096;
constexpr size_t challenge_bytes = 32;
constexpr size_t max_node_text = 256;

struct header {
  kind k = kind::error;
  uint64_t slot = 0;
  uint64_t target = 0;
  uint64_t length = 0;
};

void encode_header(const header& h, unsigned char* out);
// Checks magic, kind and length (a frame: a positive multiple of 8 bytes up
// to max_frame_bytes; an error text: at most max_error_text).
caf::expected<header> decode_header(const unsigned char* in);

// A socket that closes itself.
class socket_fd {
 public:
  socket_fd() = default;
  explicit socket_fd(int fd) : fd_(fd) {}
  socket_fd(socket_fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  socket_fd& operator=(socket_fd&& o) noexcept;
  socket_fd(const socket_fd&) = delete;
  socket_fd& operator=(const socket_fd&) = delete;
  ~socket_fd();
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  // Wakes every thread blocked on the socket (they see an error or EOF);
  // the descriptor stays valid until destruction.
  void shutdown() const;
  // Gives up ownership: the caller closes the descriptor returned.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// Binds and listens on host:port (port 0: the OS picks; `port` is set),
// with room for `backlog` connections not yet accepted. `who` opens error
// messages (the cluster gate uses these too).
caf::expected<socket_fd> listen_on(const std::string& host, uint16_t& port, int backlog = 64,
                                   const char* who = "data plane");
// Connects within `timeout`, with TCP_NODELAY.
caf::expected<socket_fd> connect_to(const std::string& host, uint16_t port, std::chrono::milliseconds timeout,
                                    const char* who = "data plane");
// Sets TCP_NODELAY, and send/receive timeouts (zero: none).
void set_options(int fd, std::chrono::milliseconds timeout);

// Blocking I/O of exactly n bytes; false on EOF, error or timeout (errno set).
bool read_exact(int fd, void* data, size_t n);
bool write_exact(int fd, const void* data, size_t n);

// One connection's bytes after the TCP connect: the socket itself, or a
// TLS session over it (its handshake done). One thread may read while
// another writes. Does not own the socket.
class link {
 public:
  explicit link(int fd) : fd_(fd) {}
  link(int fd, std::unique_ptr<tls_session> tls) : fd_(fd), tls_(std::move(tls)) {}
  // Each blocking step waits at most this long (zero: no limit).
  void set_timeout(std::chrono::milliseconds timeout);
  // As the int versions; a TLS failure sets errno to EPROTO (failure() says why).
  bool read_exact(void* data, size_t n);
  bool write_all(iovec* iov, size_t count);
  std::string failure() const;
  bool encrypted() const { return tls_ != nullptr; }
  const tls_session* tls() const { return tls_.get(); }

 private:
  int fd_;
  std::unique_ptr<tls_session> tls_;
  std::mutex tls_mtx_;
  std::chrono::milliseconds timeout_{0};
  std::vector<unsigned char> staging_;  // small pieces gathered into one TLS record (writer only)
};

// Writes one header and the frame's stream encoding straight from its
// segments (one writev, no copy; with TLS one encryption pass). `h.length`
// is set from the frame.
bool write_frame(link& l, header h, const frame& f);
bool write_text(link& l, header h, const std::string& text);
// Reads a frame of h.length bytes into a pooled buffer and parses it.
caf::expected<frame_ptr> read_frame(link& l, const header& h);
caf::expected<std::string> read_text(link& l, const header& h);

// The handshake; each side's timeout is the link's (set_timeout).
// Client: proves the secret and checks the listener's proof and node id
// (`expected_node`, empty: any). Server: returns the peer's node id.
caf::error handshake_client(link& l, const cluster_secret& secret, const std::string& my_node,
                            const std::string& expected_node);
caf::expected<std::string> handshake_server(link& l, const cluster_secret& secret, const std::string& my_node);

}  // namespace keel::dp
