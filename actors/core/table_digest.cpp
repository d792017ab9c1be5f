// The content hash of an embedding table (table_snapshot.hpp): its rows in
// ascending key order, whatever order they lie in, so that a restored table
// hashes as the one it was taken from; and the combination of such hashes.
#include <openssl/evp.h>

#include <stdexcept>

#include "actors/core/table_codec.hpp"
#include "actors/core/table_snapshot.hpp"
#include "messages/hex.hpp"

namespace keel {

using namespace table_wire;

namespace {

// A SHA-256 in progress (OpenSSL's EVP interface), freed on every path.
class sha256 {
 public:
  sha256() : ctx_(EVP_MD_CTX_new()) {
    if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1)
      throw std::runtime_error("SHA-256 unavailable");  // only when OpenSSL itself is broken
  }
  ~sha256() { EVP_MD_CTX_free(ctx_); }
  sha256(const sha256&) = delete;
  sha256& operator=(const sha256&) = delete;
  void add(const void* p, size_t n) { EVP_DigestUpdate(ctx_, p, n); }
  template <class T>
  void add_value(T v) {
    add(&v, sizeof v);
  }
  table_digest finish() {
    table_digest d{};
    unsigned len = 0;
    EVP_DigestFinal_ex(ctx_, d.data(), &len);
    return d;
  }

 private:
  EVP_MD_CTX* ctx_;
};

}  // namespace

table_digest content_sha256(const embedding_table& table) {
  sha256 h;
  const std::string& name = table.name();
  h.add_value(static_cast<uint32_t>(name.size()));
  h.add(name.data(), name.size());
  h.add_value(table.dim());
  h.add_value(table.rows());
  const auto order = table_codec::rows_by_key(table);
  for (size_t i = 0; i < order.size(); ++i) {
    if (i + rows_ahead < order.size())
      table_codec::prefetch(table, order[i + rows_ahead].second);
    const auto [key, r] = order[i];
    h.add_value(key);
    h.add(table_codec::values(table, r), size_t{table.dim()} * sizeof(float));
  }
  return h.finish();
}

table_digest combine_digests(const std::vector<table_digest>& parts) {
  sha256 h;
  for (const auto& p : parts) h.add(p.data(), p.size());
  return h.finish();
}

std::string to_hex(const table_digest& d) {
  return hex_of(d.data(), d.size());
}

}  // namespace keel
