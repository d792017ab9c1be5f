#pragma once
// A cluster_secret is the shared key that makes a process a member of a keel
// cluster. Nodes and coordinators prove they know it with HMAC-SHA256 over a
// fresh random challenge (actors/cluster/node_agent.hpp describes the handshake); the
// secret itself never crosses the network. Loading refuses a missing, empty,
// unreadable or too-short secret with an error naming the source. A value
// type; copies share nothing and any thread may use a const one.

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace keel {

using hmac_digest = std::array<uint8_t, 32>;

// Fewer bytes than this is refused: a short secret is guessable offline from
// one recorded handshake.
constexpr size_t min_secret_bytes = 16;
// A secret file larger than this is refused unread (/dev/zero included).
constexpr size_t max_secret_file_bytes = 64 * 1024;

class cluster_secret {
 public:
  // No secret: proves nothing; a node agent refuses to start with it.
  cluster_secret() = default;
  bool empty() const { return bytes_.empty(); }

  // Reads the secret from `file` (one trailing newline is ignored), which
  // must be a regular file (a link to one is followed) of at most
  // max_secret_file_bytes: a FIFO or a device is refused before it is read.
  // Errors: not_found / io_error naming the file, invalid_argument when it is
  // not a regular file, too large, empty or shorter than min_secret_bytes.
  static caf::expected<cluster_secret> from_file(const std::filesystem::path& file);

  // Uses `bytes` as the secret; the same length rules as from_file, with
  // `source` naming where the bytes came from in errors.
  static caf::expected<cluster_secret> from_bytes(std::string bytes, const std::string& source);

  // From `file` (--secret-file) when it is not empty, else from the
  // environment variable KEEL_CLUSTER_SECRET; an error naming both when
  // neither is there.
  static caf::expected<cluster_secret> from_file_or_env(const std::string& file);

  // HMAC-SHA256 under this secret of `label`, `challenge` and `node`, each
  // length-prefixed, so no two different triples hash the same input.
  hmac_digest prove(const std::string& label, const uint8_t* challenge, size_t challenge_bytes,
                    const std::string& node) const;

 private:
  explicit cluster_secret(std::string bytes) : bytes_(std::move(bytes)) {}
  std::string bytes_;
};

// `n` bytes from the operating system's CSPRNG (OpenSSL RAND_bytes).
std::vector<uint8_t> random_bytes(size_t n);

// Compares two byte strings in time independent of where they differ.
bool equal_in_constant_time(const uint8_t* a, size_t a_bytes, const uint8_t* b, size_t b_bytes);

}  // namespace keel
