#include "actors/net/tls.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "messages/errors.hpp"
#include "storage/error_context.hpp"
#include "storage/regular_file.hpp"

namespace keel {

namespace {

std::string openssl_reason(unsigned long e) {
  if (e == 0)
    return "no reason given";
  const char* r = ERR_reason_error_string(e);
  return r != nullptr ? std::string(r) : "OpenSSL error " + std::to_string(e);
}

// The last error OpenSSL queued on this thread, and an empty queue after.
std::string take_openssl_reason() {
  unsigned long last = 0;
  while (auto e = ERR_get_error()) last = e;
  return openssl_reason(last);
}

std::string subject_cn(X509* cert) {
  char cn[256] = "";
  if (cert != nullptr)
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
  return cn;
}

// Every name `cert` states: DNS and IP subjectAltNames, else its CN.
std::vector<std::string> names_of(X509* cert) {
  std::vector<std::string> out;
  if (cert == nullptr)
    return out;
  auto* sans = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; sans != nullptr && i < sk_GENERAL_NAME_num(sans); ++i) {
    auto* gn = sk_GENERAL_NAME_value(sans, i);
    if (gn->type == GEN_DNS) {
      auto* s = gn->d.dNSName;
      out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                       static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (gn->type == GEN_IPADD && ASN1_STRING_length(gn->d.iPAddress) == 4) {
      char text[INET_ADDRSTRLEN] = "";
      ::inet_ntop(AF_INET, ASN1_STRING_get0_data(gn->d.iPAddress), text, sizeof text);
      out.emplace_back(text);
    }
  }
  GENERAL_NAMES_free(sans);
  if (out.empty() && !subject_cn(cert).empty())
    out.push_back(subject_cn(cert));
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  if (names.empty())
    return "no name";
  std::string s;
  for (auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

int verify_callback(int ok, X509_STORE_CTX* store) {
  if (ok)
    return ok;
  auto* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto* session = ssl ? static_cast<tls_session*>(SSL_get_app_data(ssl)) : nullptr;
  if (session == nullptr)
    return ok;
  auto err = X509_STORE_CTX_get_error(store);
  // The peer's own certificate names it best, whichever link of its chain failed.
  auto* cert = X509_STORE_CTX_get0_cert(store) ? X509_STORE_CTX_get0_cert(store) : X509_STORE_CTX_get_current_cert(store);
  auto what = std::string(X509_verify_cert_error_string(err));
  switch (err) {
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      session->note_verify_failure("its certificate is for " + joined(names_of(cert)) +
                                   ", not for the node its route names (" + what + ")");
      break;
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
      session->note_verify_failure("its certificate (CN " + subject_cn(cert) +
                                   ") is not signed by this cluster's CA (" + what + ")");
      break;
    default:
      session->note_verify_failure("its certificate (CN " + subject_cn(cert) + ") is refused: " + what);
  }
  return ok;
}

// A socket BIO that writes with MSG_NOSIGNAL: a peer that closes must not
// raise SIGPIPE in a process that did not ignore it.
int nosignal_write(BIO* b, const char* data, int n) {
  int fd = -1;
  BIO_get_fd(b, &fd);
  BIO_clear_retry_flags(b);
  auto sent = ::send(fd, data, static_cast<size_t>(n), MSG_NOSIGNAL);
  if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    BIO_set_retry_write(b);
  return static_cast<int>(sent);
}

int nosignal_read(BIO* b, char* data, int n) {
  int fd = -1;
  BIO_get_fd(b, &fd);
  BIO_clear_retry_flags(b);
  auto got = ::recv(fd, data, static_cast<size_t>(n), 0);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    BIO_set_retry_read(b);
  if (got == 0)
    BIO_set_flags(b, BIO_FLAGS_IN_EOF);
  return static_cast<int>(got);
}

int nosignal_puts(BIO* b, const char* s) {
  return nosignal_write(b, s, static_cast<int>(std::strlen(s)));
}

const BIO_METHOD* nosignal_socket_method() {
  static const BIO_METHOD* method = [] {
    auto* m = BIO_meth_new(BIO_TYPE_SOCKET, "keel socket");
    const BIO_METHOD* plain = BIO_s_socket();
    BIO_meth_set_write(m, nosignal_write);
    BIO_meth_set_read(m, nosignal_read);
    BIO_meth_set_puts(m, nosignal_puts);
    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(plain));
    BIO_meth_set_create(m, BIO_meth_get_create(plain));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(plain));
    return m;
  }();
  return method;
}

// A certificate chain, key or CA bundle larger than this is refused unread.
constexpr uint64_t max_pem_file_bytes = uint64_t{1} << 20;

caf::error bad_file(const std::string& flag, const std::string& file, const std::string& why) {
  return make_error(errc::invalid_argument, flag + " " + file + ": " + why);
}

caf::error check_readable(const std::string& flag, const std::string& file) {
  if (file.empty())
    return make_error(errc::invalid_argument, flag + " is missing (TLS needs a certificate, its key and the CA)");
  std::error_code ec;
  if (!std::filesystem::exists(file, ec))
    return bad_file(flag, file, "does not exist");
  if (std::filesystem::is_directory(file, ec))
    return bad_file(flag, file, "is a directory");
  // What OpenSSL then reads is a regular file of a PEM's size: never a
  // FIFO (whose open would block), a device or an endless file.
  auto pem = read_regular_file(file, max_pem_file_bytes, symlinks::follow);
  if (!pem)
    return make_error(errc::invalid_argument, flag + " " + error_text(pem.error()));
  return {};
}

}  // namespace

// ---- tls_context ----

caf::expected<std::shared_ptr<tls_context>> tls_context::load(const tls_files& f, const std::string& prefix) {
  for (auto [flag, file] : {std::pair{prefix + "cert", f.cert}, {prefix + "key", f.key}, {prefix + "ca", f.ca}})
    if (auto err = check_readable(flag, file))
      return err;
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_method());
  if (ctx == nullptr)
    return make_error(errc::io_error, "cannot make a TLS context: " + take_openssl_reason());
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> guard(ctx, SSL_CTX_free);
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // Session tickets would only let a peer resume; every link handshakes in full.
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // AES-128-GCM first: as safe for this use and faster than AES-256 (with AES-NI).
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
  SSL_CTX_set_default_read_buffer_len(ctx, 64 * 1024);  // for read_ahead()
  if (SSL_CTX_use_certificate_chain_file(ctx, f.cert.c_str()) != 1)
    return bad_file(prefix + "cert", f.cert, "not a PEM certificate (" + take_openssl_reason() + ")");
  if (SSL_CTX_use_PrivateKey_file(ctx, f.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    auto reason = take_openssl_reason();
    if (reason.find("mismatch") != std::string::npos)
      return bad_file(prefix + "key", f.key, "is not the key of the certificate " + f.cert);
    return bad_file(prefix + "key", f.key, "not an unencrypted PEM private key (" + reason + ")");
  }
  if (SSL_CTX_check_private_key(ctx) != 1)
    return bad_file(prefix + "key", f.key, "is not the key of the certificate " + f.cert);
  if (SSL_CTX_load_verify_locations(ctx, f.ca.c_str(), nullptr) != 1)
    return bad_file(prefix + "ca", f.ca, "not a PEM CA certificate (" + take_openssl_reason() + ")");
  // Our own certificate must be one the CA signed, or every peer refuses it.
  X509* own = SSL_CTX_get0_certificate(ctx);
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get0_chain_certs(ctx, &chain);
  std::unique_ptr<X509_STORE_CTX, void (*)(X509_STORE_CTX*)> check(X509_STORE_CTX_new(), X509_STORE_CTX_free);
  if (!check || X509_STORE_CTX_init(check.get(), SSL_CTX_get_cert_store(ctx), own, chain) != 1)
    return make_error(errc::io_error, "cannot check " + f.cert + ": " + take_openssl_reason());
  if (X509_verify_cert(check.get()) != 1)
    return bad_file(prefix + "cert", f.cert,
                    std::string("is not valid under the CA ") + f.ca + " (" +
                      X509_verify_cert_error_string(X509_STORE_CTX_get_error(check.get())) + ")");
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_callback);
  auto names = names_of(own);
  guard.release();
  return std::shared_ptr<tls_context>(new tls_context(ctx, names.empty() ? std::string() : names.front()));
}

tls_context::~tls_context() {
  SSL_CTX_free(ctx_);
}

// ---- tls_session ----

caf::expected<std::unique_ptr<tls_session>> tls_session::make(const tls_context& ctx, int fd, role r,
                                                              const std::string& expected_name) {
  ERR_clear_error();
  SSL* ssl = SSL_new(ctx.native());
  if (ssl == nullptr)
    return make_error(errc::io_error, "cannot make a TLS session: " + take_openssl_reason());
  std::unique_ptr<tls_session> s(new tls_session(ssl, fd, r, expected_name));
  BIO* bio = BIO_new(nosignal_socket_method());
  if (bio == nullptr)
    return make_error(errc::io_error, "cannot make a TLS session: " + take_openssl_reason());
  BIO_set_fd(bio, fd, BIO_NOCLOSE);
  SSL_set_bio(ssl, bio, bio);
  SSL_set_read_ahead(ssl, 0);  // until read_ahead(): see there
  SSL_set_app_data(ssl, s.get());
  if (r == role::connect) {
    SSL_set_connect_state(ssl);
    in_addr ip{};
    bool ok = ::inet_pton(AF_INET, expected_name.c_str(), &ip) == 1
                ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), expected_name.c_str()) == 1
                : SSL_set1_host(ssl, expected_name.c_str()) == 1;
    if (expected_name.empty() || !ok)
      return make_error(errc::invalid_argument, "cannot check a TLS peer's name against '" + expected_name + "'");
  } else {
    SSL_set_accept_state(ssl);
  }
  return s;
}

tls_session::~tls_session() {
  SSL_free(ssl_);
}

void tls_session::note_verify_failure(std::string why) {
  if (verify_failure_.empty())
    verify_failure_ = std::move(why);
}

void tls_session::fail(int ret, const char* what) {
  if (!failure_.empty())
    return;
  auto code = SSL_get_error(ssl_, ret);
  auto queued = ERR_peek_last_error();
  auto reason = take_openssl_reason();
  eof_ = code == SSL_ERROR_ZERO_RETURN || (code == SSL_ERROR_SYSCALL && queued == 0);
  if (!verify_failure_.empty())
    failure_ = verify_failure_;
  else if (code == SSL_ERROR_ZERO_RETURN)
    failure_ = "the peer closed the TLS connection";
  else if (code == SSL_ERROR_SYSCALL && queued == 0)
    failure_ = errno == 0 || ret == 0 ? std::string("the peer closed the connection") + what
                                      : std::string(std::strerror(errno)) + what;
  else if (reason.find("alert") != std::string::npos)
    failure_ = "the peer refused this process's TLS" + std::string(what) + " (" + reason + ")";
  else if (reason.find("wrong version number") != std::string::npos ||
           reason.find("http request") != std::string::npos ||
           reason.find("unknown protocol") != std::string::npos ||
           reason.find("record layer failure") != std::string::npos)
    failure_ = std::string("it does not speak TLS (") + reason + ")";
  else if (reason.find("peer did not return a certificate") != std::string::npos)
    failure_ = "it sent no certificate (" + reason + ")";
  else
    failure_ = "TLS failed" + std::string(what) + ": " + reason;
}

tls_session::progress tls_session::handshake_step() {
  ERR_clear_error();
  errno = 0;
  int ret = SSL_do_handshake(ssl_);
  if (ret == 1) {
    peer_name_.clear();
    auto names = names_of(SSL_get0_peer_certificate(ssl_));
    peer_name_ = names.empty() ? "?" : names.front();
    if (role_ == role::connect)
      peer_name_ = expected_;  // verified: the certificate states it
    return want_ = progress::done;
  }
  switch (SSL_get_error(ssl_, ret)) {
    case SSL_ERROR_WANT_READ:
      return want_ = progress::want_read;
    case SSL_ERROR_WANT_WRITE:
      return want_ = progress::want_write;
    default:
      fail(ret, " during the TLS handshake");
      return want_ = progress::failed;
  }
}

namespace {

// Waits until `fd` is ready for what `p` wants, or the deadline passes
// (time_point::max(): no limit).
bool wait_for(int fd, tls_session::progress p, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    int timeout_ms = -1;
    if (deadline != std::chrono::steady_clock::time_point::max()) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return false;
      timeout_ms = static_cast<int>(left.count());
    }
    pollfd pfd{fd, static_cast<short>(p == tls_session::progress::want_write ? POLLOUT : POLLIN), 0};
    auto n = ::poll(&pfd, 1, timeout_ms);
    if (n > 0)
      return true;
    if (n < 0 && errno != EINTR)
      return false;
  }
}

std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  return timeout.count() > 0 ? std::chrono::steady_clock::now() + timeout
                             : std::chrono::steady_clock::time_point::max();
}

}  // namespace

caf::error tls_session::handshake(std::chrono::milliseconds timeout) {
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto p = handshake_step();
    if (p == progress::done)
      return {};
    if (p == progress::failed)
      return make_error(verify_failure_.empty() && failure_.find("refused") == std::string::npos ? errc::io_error
                                                                                                  : errc::not_authenticated,
                        failure_);
    if (!wait_for(fd_, p, deadline)) {
      failure_ = "no complete TLS handshake within " + std::to_string(timeout.count()) + " ms";
      return make_error(errc::timeout, failure_);
    }
  }
}

long tls_session::io_result(int ret, const char* what) {
  if (ret > 0) {
    want_ = progress::done;
    return ret;
  }
  switch (SSL_get_error(ssl_, ret)) {
    case SSL_ERROR_WANT_READ:
      want_ = progress::want_read;
      return 0;
    case SSL_ERROR_WANT_WRITE:
      want_ = progress::want_write;
      return 0;
    default:
      fail(ret, what);
      want_ = progress::failed;
      return -1;
  }
}

long tls_session::read_some(void* data, size_t n) {
  ERR_clear_error();
  errno = 0;
  return io_result(SSL_read(ssl_, data, static_cast<int>(std::min<size_t>(n, 1u << 30))), " while reading");
}

long tls_session::write_some(const void* data, size_t n) {
  ERR_clear_error();
  errno = 0;
  return io_result(SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(n, 1u << 30))), " while writing");
}

namespace {

template <class F>
auto locked(std::mutex* lock, F f) {
  if (lock == nullptr)
    return f();
  std::lock_guard<std::mutex> guard(*lock);
  return f();
}

}  // namespace

bool tls_session::read_exact(void* data, size_t n, std::chrono::milliseconds timeout, std::mutex* lock) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    progress want;
    auto got = locked(lock, [&] {
      auto r = read_some(p, n);
      want = want_;
      return r;
    });
    if (got > 0) {
      p += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    if (got < 0) {
      errno = eof_ ? 0 : EPROTO;
      return false;
    }
    if (!wait_for(fd_, want, deadline_after(timeout))) {
      errno = EAGAIN;
      return false;
    }
  }
  return true;
}

bool tls_session::write_exact(const void* data, size_t n, std::chrono::milliseconds timeout, std::mutex* lock) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    progress want;
    auto sent = locked(lock, [&] {
      auto r = write_some(p, n);
      want = want_;
      return r;
    });
    if (sent > 0) {
      p += sent;
      n -= static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0) {
      errno = eof_ ? EPIPE : EPROTO;
      return false;
    }
    if (!wait_for(fd_, want, deadline_after(timeout))) {
      errno = EAGAIN;
      return false;
    }
  }
  return true;
}

bool tls_session::ended_by_peer() {
  pollfd pfd{fd_, POLLIN, 0};
  if (::poll(&pfd, 1, 0) <= 0)
    return false;
  char byte = 0;
  ERR_clear_error();
  errno = 0;
  int r = SSL_peek(ssl_, &byte, 1);
  if (r > 0 || io_result(r, " while reading") >= 0)
    return false;
  errno = eof_ ? 0 : EPROTO;
  return true;
}

void tls_session::read_ahead() {
  SSL_set_read_ahead(ssl_, 1);
}

size_t tls_session::pending() const {
  // With read-ahead, records not yet decrypted wait in OpenSSL's buffer,
  // where poll cannot see them: report at least a byte for them.
  auto n = static_cast<size_t>(SSL_pending(ssl_));
  return n == 0 && SSL_has_pending(ssl_) ? 1 : n;
}

}  // namespace keel
