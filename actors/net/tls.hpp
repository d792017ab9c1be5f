#pragma once
// TLS for keel's links (the cluster gate's connections that CAF's BASP then
// uses, and the data plane's), on OpenSSL: TLS 1.2 or later, certificates
// verified both ways against one CA. A tls_context holds this process's
// certificate, key and CA and is shared by every connection (thread-safe
// once loaded); a tls_session is one connection's TLS over a socket the
// caller owns, used by one thread at a time.
//
// Identity: a node is known by a name its certificate states (a DNS name or
// IP address in subjectAltName, else the subject's CN). The side that
// connects names the node it means (its route's name) and refuses a peer
// whose certificate does not state it; the side that accepts requires a
// certificate the CA signed and learns the peer's name from it. Refusals
// say why (not signed by our CA, expired, the wrong name, no certificate,
// our own certificate refused by the peer), so callers can log them.

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

struct ssl_ctx_st;
struct ssl_st;

namespace keel {

// Where this process's TLS material lives. All three set: TLS on; none: off.
struct tls_files {
  std::string cert;  // PEM certificate (chain), this node's identity
  std::string key;   // PEM private key of `cert`, unencrypted
  std::string ca;    // PEM certificate of the CA that signs every member
  bool any() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

class tls_context {
 public:
  // Loads and checks the files: each readable PEM, the key matching the
  // certificate, the certificate signed by the CA. Errors
  // (invalid_argument) name the flag and the file and what was wrong with
  // it; `flag_prefix` opens flag names ("--tls-" gives "--tls-cert").
  static caf::expected<std::shared_ptr<tls_context>> load(const tls_files& files,
                                                          const std::string& flag_prefix = "--tls-");

  // The name this process's certificate states first (DNS SAN, IP SAN, else CN).
  const std::string& name() const { return name_; }
  ssl_ctx_st* native() const { return ctx_; }

  ~tls_context();
  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

 private:
  tls_context(ssl_ctx_st* ctx, std::string name) : ctx_(ctx), name_(std::move(name)) {}
  ssl_ctx_st* ctx_;
  std::string name_;
};

// What the side that connects needs: the context (null: no TLS) and the
// name the peer's certificate must state.
struct tls_peer {
  std::shared_ptr<const tls_context> context;
  std::string name;
  bool on() const { return context != nullptr; }
};

// One connection's TLS. The socket stays the caller's (not closed here).
class tls_session {
 public:
  enum class role { accept, connect };
  enum class progress { done, want_read, want_write, failed };

  // `expected_name` (connect only): the name the peer's certificate must
  // state. Errors only when OpenSSL cannot make a session (out of memory).
  static caf::expected<std::unique_ptr<tls_session>> make(const tls_context& ctx, int fd, role r,
                                                          const std::string& expected_name = {});

  // One non-blocking step of the handshake (the socket must be
  // non-blocking); after `failed`, failure() says why.
  progress handshake_step();
  // The whole handshake within `timeout`, waiting with poll (the socket may
  // be blocking or not; it is left non-blocking). Errors: timeout,
  // not_authenticated (a certificate refused, either side), io_error.
  caf::error handshake(std::chrono::milliseconds timeout);
  const std::string& failure() const { return failure_; }
  // The peer's name as its verified certificate states it (after the handshake).
  const std::string& peer_name() const { return peer_name_; }

  // Non-blocking I/O after the handshake. n > 0: bytes moved; 0: would
  // block (want() says on what); -1: closed or failed (failure() says).
  long read_some(void* data, size_t n);
  long write_some(const void* data, size_t n);
  progress want() const { return want_; }
  // After a -1: whether the peer just closed (rather than TLS failing).
  bool peer_closed() const { return eof_; }
  // Blocking I/O of exactly n bytes on the non-blocking socket, waiting
  // with poll at most `timeout` for each step (zero: no limit). False on
  // end of stream (errno 0), timeout (EAGAIN), a socket error (its errno)
  // or a TLS failure (EPROTO; failure() says why). With `lock`, each call
  // into OpenSSL holds it and waiting does not: one thread may read while
  // another writes (the data plane's reader and writer).
  bool read_exact(void* data, size_t n, std::chrono::milliseconds timeout, std::mutex* lock = nullptr);
  bool write_exact(const void* data, size_t n, std::chrono::milliseconds timeout, std::mutex* lock = nullptr);
  // Whether the peer has already ended the session (its alert, or a close),
  // checked without waiting and without consuming application data; then
  // errno is EPROTO (failure() names the alert) or 0 (closed). For the side
  // that writes first after the handshake: under TLS 1.3 a server checks
  // the client's certificate after the client's handshake has completed,
  // and its refusal may be waiting unread when the client writes (which
  // then fails with a bare EPIPE).
  bool ended_by_peer();
  // Bytes already decrypted and waiting to be read (at least 1 while
  // records are buffered undecrypted): a reader driven by poll must read
  // on while this is not zero.
  size_t pending() const;
  // From now on reads take several records per system call. Off until
  // then, so that a read of a handshake's last bytes never takes what
  // follows them into this session's buffer, where a reader that waits
  // with poll before its first read (CAF's) would not see it.
  void read_ahead();

  ~tls_session();
  tls_session(const tls_session&) = delete;
  tls_session& operator=(const tls_session&) = delete;

  // Used by OpenSSL's verify callback: the first reason a certificate was refused.
  void note_verify_failure(std::string why);

 private:
  tls_session(ssl_st* ssl, int fd, role r, std::string expected)
      : ssl_(ssl), fd_(fd), role_(r), expected_(std::move(expected)) {}
  long io_result(int ret, const char* what);
  void fail(int ret, const char* what);
  ssl_st* ssl_;
  int fd_;
  role role_;
  std::string expected_;
  std::string failure_;
  std::string verify_failure_;
  std::string peer_name_;
  progress want_ = progress::done;
  bool eof_ = false;  // the peer closed (not a TLS error)
};

}  // namespace keel
