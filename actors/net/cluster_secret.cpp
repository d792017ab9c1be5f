#include "actors/net/cluster_secret.hpp"

#include <cstdlib>

#include <stdexcept>
#include <system_error>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "messages/errors.hpp"
#include "storage/error_context.hpp"
#include "storage/regular_file.hpp"

namespace keel {

caf::expected<cluster_secret> cluster_secret::from_file(const std::filesystem::path& file) {
  auto read = read_regular_file(file, max_secret_file_bytes, symlinks::follow);
  if (!read && is(read.error(), errc::not_found))
    return make_error(errc::not_found, "cluster secret file " + file.string() + " does not exist");
  if (!read)
    return in_context(read.error(), "cluster secret file ");
  auto bytes = std::move(*read);
  if (!bytes.empty() && bytes.back() == '\n')
    bytes.pop_back();
  if (!bytes.empty() && bytes.back() == '\r')
    bytes.pop_back();
  return from_bytes(std::move(bytes), "cluster secret file " + file.string());
}

caf::expected<cluster_secret> cluster_secret::from_bytes(std::string bytes, const std::string& source) {
  if (bytes.empty())
    return make_error(errc::invalid_argument, source + " is empty");
  if (bytes.size() < min_secret_bytes)
    return make_error(errc::invalid_argument, source + " holds " + std::to_string(bytes.size()) +
                                                " bytes; a cluster secret needs at least " +
                                                std::to_string(min_secret_bytes));
  return cluster_secret(std::move(bytes));
}

caf::expected<cluster_secret> cluster_secret::from_file_or_env(const std::string& file) {
  if (!file.empty())
    return from_file(file);
  if (auto env = std::getenv("KEEL_CLUSTER_SECRET"))
    return from_bytes(env, "KEEL_CLUSTER_SECRET");
  return make_error(errc::invalid_argument, "no cluster secret: pass --secret-file FILE or set KEEL_CLUSTER_SECRET");
}

hmac_digest cluster_secret::prove(const std::string& label, const uint8_t* challenge,
                                  size_t challenge_bytes, const std::string& node) const {
  std::string input;
  auto append = [&](const void* p, size_t n) {
    auto len = static_cast<uint32_t>(n);
    input.append(reinterpret_cast<const char*>(&len), sizeof(len));
    input.append(static_cast<const char*>(p), n);
  };
  append(label.data(), label.size());
  append(challenge, challenge_bytes);
  append(node.data(), node.size());
  hmac_digest out{};
  unsigned int out_len = 0;
  if (HMAC(EVP_sha256(), bytes_.data(), static_cast<int>(bytes_.size()),
           reinterpret_cast<const unsigned char*>(input.data()), input.size(), out.data(), &out_len) ==
        nullptr ||
      out_len != out.size())
    throw std::runtime_error("HMAC-SHA256 failed");  // only when OpenSSL itself is broken
  return out;
}

std::vector<uint8_t> random_bytes(size_t n) {
  std::vector<uint8_t> out(n);
  if (RAND_bytes(out.data(), static_cast<int>(n)) != 1)
    throw std::runtime_error("the OpenSSL random generator failed");
  return out;
}

bool equal_in_constant_time(const uint8_t* a, size_t a_bytes, const uint8_t* b, size_t b_bytes) {
  return a_bytes == b_bytes && CRYPTO_memcmp(a, b, a_bytes) == 0;
}

}  // namespace keel
