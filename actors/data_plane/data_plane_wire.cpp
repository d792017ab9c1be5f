#include "actors/data_plane/data_plane_wire.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "messages/errors.hpp"

namespace keel::dp {

namespace {

constexpr char hello_magic[8] = {'K', 'E', 'E', 'L', 'D', 'P', '0', '1'};
constexpr const char* server_label = "keel-data-plane-listener-proof-v1";
constexpr const char* client_label = "keel-data-plane-connector-proof-v1";
constexpr unsigned char accepted = 'K';

void put32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t get32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string errno_text() {
  return errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : errno == 0 ? "connection closed" : std::strerror(errno);
}

caf::error io(const std::string& what) {
  return make_error(errc::io_error, what + ": " + errno_text());
}

// As io(), with a TLS failure named (then not_authenticated when a
// certificate was refused).
caf::error io(const link& l, const std::string& what) {
  if (errno != EPROTO || l.failure().empty())
    return io(what);
  return make_error(l.failure().find("refused") != std::string::npos || l.failure().find("certificate") != std::string::npos
                      ? errc::not_authenticated
                      : errc::io_error,
                    what + ": TLS: " + l.failure());
}

bool read_exact(link& l, void* data, size_t n) {
  return l.read_exact(data, n);
}

bool write_all(link& l, iovec* iov, size_t count) {
  return l.write_all(iov, count);
}

bool write_exact(link& l, const void* data, size_t n) {
  iovec v{const_cast<void*>(data), n};
  return l.write_all(&v, 1);
}

caf::expected<sockaddr_in> resolve(const std::string& host, uint16_t port, const char* who) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1)
    return addr;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr)
    return make_error(errc::not_found, std::string(who) + ": cannot resolve host '" + host + "'");
  addr.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  ::freeaddrinfo(res);
  return addr;
}

// Sends the hello (magic, node, challenge) and reads the other side's.
bool write_hello(link& fd, const std::string& node, const std::vector<uint8_t>& challenge) {
  std::vector<unsigned char> out(8 + 4 + node.size() + challenge.size());
  std::memcpy(out.data(), hello_magic, 8);
  put32(out.data() + 8, static_cast<uint32_t>(node.size()));
  std::memcpy(out.data() + 12, node.data(), node.size());
  std::memcpy(out.data() + 12 + node.size(), challenge.data(), challenge.size());
  return write_exact(fd, out.data(), out.size());
}

caf::error read_hello(link& fd, std::string& node, std::vector<uint8_t>& challenge) {
  unsigned char head[12];
  if (!read_exact(fd, head, sizeof head))
    return io(fd, "data plane handshake: reading the hello");
  if (std::memcmp(head, hello_magic, 8) != 0)
    return make_error(errc::malformed_message, "data plane handshake: not a keel data plane hello");
  auto n = get32(head + 8);
  if (n == 0 || n > max_node_text)
    return make_error(errc::malformed_message,
                      "data plane handshake: node id of " + std::to_string(n) + " bytes (1 to 256 allowed)");
  node.resize(n);
  challenge.resize(challenge_bytes);
  if (!read_exact(fd, node.data(), n) || !read_exact(fd, challenge.data(), challenge.size()))
    return io(fd, "data plane handshake: reading the hello");
  return {};
}

bool proof_matches(const hmac_digest& expected, const unsigned char* got) {
  return equal_in_constant_time(expected.data(), expected.size(), got, expected.size());
}

}  // namespace

void encode_header(const header& h, unsigned char* out) {
  put32(out, header_magic);
  put32(out + 4, static_cast<uint32_t>(h.k));
  put64(out + 8, h.slot);
  put64(out + 16, h.target);
  put64(out + 24, h.length);
}

caf::expected<header> decode_header(const unsigned char* in) {
  if (get32(in) != header_magic)
    return make_error(errc::malformed_message, "data plane: a header without its magic number (stream out of sync)");
  header h;
  auto k = get32(in + 4);
  if (k < 1 || k > 5)
    return make_error(errc::malformed_message, "data plane: unknown message kind " + std::to_string(k));
  h.k = static_cast<kind>(k);
  h.slot = get64(in + 8);
  h.target = get64(in + 16);
  h.length = get64(in + 24);
  if (h.k == kind::error) {
    if (h.length > max_error_text)
      return make_error(errc::limit_exceeded, "data plane: error text of " + std::to_string(h.length) +
                                                  " bytes (at most " + std::to_string(max_error_text) + ")");
    return h;
  }
  if (h.length == 0 || h.length % sizeof(capnp::word) != 0)
    return make_error(errc::malformed_message,
                      "data plane: frame of " + std::to_string(h.length) + " bytes is not a whole number of words");
  if (h.length > max_frame_bytes)
    return make_error(errc::limit_exceeded, "data plane: frame of " + std::to_string(h.length) +
                                                " bytes exceeds the limit of " + std::to_string(max_frame_bytes));
  return h;
}

socket_fd& socket_fd::operator=(socket_fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

socket_fd::~socket_fd() {
  if (fd_ >= 0)
    ::close(fd_);
}

void socket_fd::shutdown() const {
  if (fd_ >= 0)
    ::shutdown(fd_, SHUT_RDWR);
}

caf::expected<socket_fd> listen_on(const std::string& host, uint16_t& port, int backlog, const char* who) {
  auto addr = resolve(host, port, who);
  if (!addr)
    return addr.error();
  socket_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  auto where = host + ":" + std::to_string(port);
  if (!fd || ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      ::bind(fd.get(), reinterpret_cast<sockaddr*>(&*addr), sizeof(*addr)) != 0 || ::listen(fd.get(), backlog) != 0)
    return io(std::string(who) + ": cannot listen on " + where);
  socklen_t len = sizeof(*addr);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&*addr), &len);
  port = ntohs(addr->sin_port);
  return fd;
}

void set_options(int fd, std::chrono::milliseconds timeout) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

caf::expected<socket_fd> connect_to(const std::string& host, uint16_t port, std::chrono::milliseconds timeout,
                                    const char* who) {
  auto where = host + ":" + std::to_string(port);
  auto addr = resolve(host, port, who);
  if (!addr)
    return addr.error();
  socket_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd)
    return io(std::string(who) + ": socket for " + where);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&*addr), sizeof(*addr)) != 0) {
    if (errno != EINPROGRESS)
      return io(std::string(who) + ": cannot connect to " + where);
    pollfd p{fd.get(), POLLOUT, 0};
    int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (n == 0)
      return make_error(errc::timeout, std::string(who) + ": no connection to " + where + " within " +
                                           std::to_string(timeout.count()) + " ms");
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (n < 0 || err != 0) {
      errno = n < 0 ? errno : err;
      return io(std::string(who) + ": cannot connect to " + where);
    }
  }
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  set_options(fd.get(), timeout);
  return fd;
}

bool read_exact(int fd, void* data, size_t n) {
  auto* p = static_cast<unsigned char*>(data);
  while (n > 0) {
    auto got = ::recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      if (got == 0)
        errno = 0;
      return false;
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

namespace {

// Writes every iovec in full, resuming after partial writes.
bool write_all(int fd, iovec* iov, size_t count) {
  while (count > 0) {
    auto batch = static_cast<int>(std::min<size_t>(count, 512));
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = static_cast<size_t>(batch);
    auto n = ::sendmsg(fd, &mh, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    auto left = static_cast<size_t>(n);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (left > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return true;
}

}  // namespace

bool write_exact(int fd, const void* data, size_t n) {
  iovec v{const_cast<void*>(data), n};
  return write_all(fd, &v, 1);
}

// ---- link ----

void link::set_timeout(std::chrono::milliseconds timeout) {
  timeout_ = timeout;
  if (!tls_)
    set_options(fd_, timeout);
}

bool link::read_exact(void* data, size_t n) {
  return tls_ ? tls_->read_exact(data, n, timeout_, &tls_mtx_) : dp::read_exact(fd_, data, n);
}

bool link::write_all(iovec* iov, size_t count) {
  if (!tls_)
    return dp::write_all(fd_, iov, count);
  // Pieces below a TLS record's size go out together in one record; a
  // large piece (a capnp segment) goes from its own memory.
  constexpr size_t small = 16384;
  auto flush = [&] {
    bool ok = staging_.empty() || tls_->write_exact(staging_.data(), staging_.size(), timeout_, &tls_mtx_);
    staging_.clear();
    return ok;
  };
  for (size_t i = 0; i < count; ++i) {
    auto* p = static_cast<const unsigned char*>(iov[i].iov_base);
    if (staging_.size() + iov[i].iov_len <= small) {
      staging_.insert(staging_.end(), p, p + iov[i].iov_len);
      continue;
    }
    if (!flush() || !tls_->write_exact(p, iov[i].iov_len, timeout_, &tls_mtx_))
      return false;
  }
  return flush();
}

std::string link::failure() const {
  return tls_ ? tls_->failure() : std::string();
}

bool write_frame(link& fd, header h, const frame& f) {
  auto segs = f.segments();
  std::vector<uint32_t> table((segs.size() + 2) / 2 * 2, 0);
  table[0] = static_cast<uint32_t>(segs.size() - 1);
  for (size_t i = 0; i < segs.size(); ++i) table[i + 1] = static_cast<uint32_t>(segs[i].size());
  h.length = f.encoded_size_bytes();
  unsigned char head[header_bytes];
  encode_header(h, head);
  std::vector<iovec> iov;
  iov.reserve(segs.size() + 2);
  iov.push_back({head, sizeof head});
  iov.push_back({table.data(), table.size() * sizeof(uint32_t)});
  for (auto& s : segs)
    iov.push_back({const_cast<capnp::word*>(s.begin()), s.size() * sizeof(capnp::word)});
  return write_all(fd, iov.data(), iov.size());
}

bool write_text(link& fd, header h, const std::string& text) {
  auto body = text.substr(0, max_error_text);
  h.length = body.size();
  unsigned char head[header_bytes];
  encode_header(h, head);
  iovec iov[2] = {{head, sizeof head}, {body.data(), body.size()}};
  return write_all(fd, iov, 2);
}

caf::expected<frame_ptr> read_frame(link& fd, const header& h) {
  auto buf = buffer_pool::process_default()->acquire(h.length / sizeof(capnp::word));
  if (!read_exact(fd, buf.bytes(), h.length))
    return io(fd, "data plane: reading a frame of " + std::to_string(h.length) + " bytes");
  return frame::parse(std::move(buf), h.length);
}

caf::expected<std::string> read_text(link& fd, const header& h) {
  std::string text(h.length, '\0');
  if (!read_exact(fd, text.data(), text.size()))
    return io(fd, "data plane: reading an error text");
  return text;
}

caf::error handshake_client(link& fd, const cluster_secret& secret, const std::string& my_node,
                            const std::string& expected_node) {
  auto mine = random_bytes(challenge_bytes);
  if (!write_hello(fd, my_node, mine))
    return io(fd, "data plane handshake: sending the hello");
  std::string node;
  std::vector<uint8_t> theirs;
  if (auto err = read_hello(fd, node, theirs))
    return err;
  unsigned char proof[sizeof(hmac_digest)];
  if (!read_exact(fd, proof, sizeof proof))
    return io(fd, "data plane handshake: reading the listener's proof");
  if (!proof_matches(secret.prove(server_label, mine.data(), mine.size(), node), proof))
    return make_error(errc::not_authenticated,
                      "data plane handshake: the listener (node " + node + ") does not prove the cluster secret");
  if (!expected_node.empty() && node != expected_node)
    return make_error(errc::not_found, "data plane handshake: the listener is node " + node + ", not node " +
                                           expected_node + " (did that node restart on the same port?)");
  auto mine_proof = secret.prove(client_label, theirs.data(), theirs.size(), my_node);
  if (!write_exact(fd, mine_proof.data(), mine_proof.size()))
    return io(fd, "data plane handshake: sending the proof");
  unsigned char verdict = 0;
  if (!read_exact(fd, &verdict, 1) || verdict != accepted)
    return make_error(errc::not_authenticated, "data plane handshake: node " + node + " refused this process's proof");
  return {};
}

caf::expected<std::string> handshake_server(link& fd, const cluster_secret& secret, const std::string& my_node) {
  std::string node;
  std::vector<uint8_t> theirs;
  if (auto err = read_hello(fd, node, theirs))
    return err;
  auto mine = random_bytes(challenge_bytes);
  auto proof = secret.prove(server_label, theirs.data(), theirs.size(), my_node);
  if (!write_hello(fd, my_node, mine) || !write_exact(fd, proof.data(), proof.size()))
    return io(fd, "data plane handshake: answering node " + node);
  unsigned char got[sizeof(hmac_digest)];
  if (!read_exact(fd, got, sizeof got))
    return io(fd, "data plane handshake: reading node " + node + "'s proof");
  if (!proof_matches(secret.prove(client_label, mine.data(), mine.size(), node), got))
    return make_error(errc::not_authenticated, "data plane handshake: node " + node + " does not prove the cluster secret");
  if (!write_exact(fd, &accepted, 1))
    return io(fd, "data plane handshake: accepting node " + node);
  return node;
}

}  // namespace keel::dp
