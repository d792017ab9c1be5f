// The run's fingerprint (job.hpp's params_sha256): SHA-256 of the dense and
// sparse parameters, combined with the tables' content hashes when the model
// has tables (table_snapshot.hpp), so that it is computed without gathering
// rows.
#include <openssl/evp.h>

#include <array>
#include <string>
#include <vector>

#include "actors/core/table_snapshot.hpp"
#include "actors/job/job.hpp"

namespace keel {

namespace {

table_digest dense_sparse_digest(const std::vector<float>& dense, const std::vector<float>& sparse) {
  table_digest md{};
  unsigned len = 0;
  auto* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx, dense.data(), dense.size() * sizeof(float));
  EVP_DigestUpdate(ctx, sparse.data(), sparse.size() * sizeof(float));
  EVP_DigestFinal_ex(ctx, md.data(), &len);
  EVP_MD_CTX_free(ctx);
  return md;
}

}  // namespace

std::string params_sha256(const std::vector<float>& dense, const std::vector<float>& sparse) {
  return to_hex(dense_sparse_digest(dense, sparse));
}

std::string params_sha256(const std::vector<float>& dense, const std::vector<float>& sparse,
                          const std::vector<std::array<unsigned char, 32>>& table_digests) {
  std::vector<table_digest> parts = {dense_sparse_digest(dense, sparse)};
  parts.insert(parts.end(), table_digests.begin(), table_digests.end());
  return to_hex(combine_digests(parts));
}

}  // namespace keel
