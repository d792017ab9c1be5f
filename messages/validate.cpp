#include "messages/validate.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "messages/errors.hpp"
#include "messages/frame.hpp"

namespace keel {

namespace {

using std::to_string;

caf::error bad(const std::string& where, const std::string& what) {
  return make_error(errc::invalid_field, where + ": " + what);
}

caf::error check_version(const char* msg, uint16_t v) {
  if (v == 0 || v > schema::PROTOCOL_VERSION)
    return make_error(errc::unsupported_version,
                      std::string(msg) + ".version: " + to_string(v) +
                        " (this build speaks 1.." + to_string(schema::PROTOCOL_VERSION) + ")");
  return {};
}

caf::error check_count(const std::string& where, size_t n, size_t max) {
  if (n > max)
    return make_error(errc::limit_exceeded,
                      where + ": " + to_string(n) + " entries exceed the limit of " + to_string(max));
  return {};
}

caf::error check_text(const std::string& where, capnp::Text::Reader t, const decode_limits& limits,
                      bool required) {
  if (t.size() > limits.max_text_bytes)
    return make_error(errc::limit_exceeded, where + ": " + to_string(t.size()) +
                                              " bytes exceed the limit of " +
                                              to_string(limits.max_text_bytes));
  if (required && t.size() == 0)
    return bad(where, "must not be empty");
  if (std::memchr(t.begin(), '\0', t.size()) != nullptr)
    return bad(where, "contains a NUL byte");
  return {};
}

std::string range_text(uint64_t b, uint64_t e) {
  return "[" + to_string(b) + "," + to_string(e) + ")";
}

// Dense ranges: well-formed, sorted, non-overlapping, values sized to the span.
caf::error check_dense(const std::string& where, capnp::List<schema::DenseRange>::Reader ranges,
                       const decode_limits& limits) {
  if (auto err = check_count(where, ranges.size(), limits.max_dense_ranges))
    return err;
  uint64_t prev_end = 0;
  for (unsigned i = 0; i < ranges.size(); ++i) {
    auto r = ranges[i];
    auto at = where + "[" + to_string(i) + "]";
    auto b = r.getBegin();
    auto e = r.getEnd();
    if (e <= b)
      return bad(at, "empty or inverted range " + range_text(b, e));
    if (i > 0 && b < prev_end)
      return bad(at, "range " + range_text(b, e) + " overlaps or precedes the previous one ending at " +
                       to_string(prev_end));
    prev_end = e;
    auto values = r.getValues();
    uint64_t span = e - b;
    if (span > std::numeric_limits<uint64_t>::max() / 4 || values.size() != span * 4)
      return bad(at + ".values", to_string(values.size()) + " bytes, but range " + range_text(b, e) +
                                   " needs " + to_string(span) + " float32 values");
    if (limits.require_finite && !(limits.source && limits.source->known_finite(values.begin(), values.size())) &&
        !all_finite(values.begin(), span))
      return bad(at + ".values", "contains a NaN or infinite value");
  }
  return {};
}

caf::error check_sparse_keys(const std::string& where, capnp::List<uint64_t>::Reader keys,
                             const decode_limits& limits) {
  if (auto err = check_count(where, keys.size(), limits.max_sparse_keys))
    return err;
  for (unsigned i = 1; i < keys.size(); ++i)
    if (keys[i] <= keys[i - 1])
      return bad(where + "[" + to_string(i) + "]",
                 "key " + to_string(keys[i]) + " is not greater than the one before (" +
                   to_string(keys[i - 1]) + "); keys must be strictly increasing");
  return {};
}

caf::error check_sparse(const std::string& where, schema::SparseBlock::Reader s,
                        const decode_limits& limits) {
  auto keys = s.getKeys();
  auto values = s.getValues();
  if (auto err = check_sparse_keys(where + ".keys", keys, limits))
    return err;
  if (keys.size() != values.size())
    return bad(where, to_string(keys.size()) + " keys but " + to_string(values.size()) + " values");
  if (limits.require_finite)
    for (unsigned i = 0; i < values.size(); ++i)
      if (!std::isfinite(values[i]))
        return bad(where + ".values[" + to_string(i) + "]", "is NaN or infinite");
  return {};
}

// A sparse key inside a dense range would be applied twice.
template <class Ranges>
caf::error check_disjoint(const std::string& where, Ranges ranges, capnp::List<uint64_t>::Reader keys) {
  unsigned r = 0;
  for (unsigned i = 0; i < keys.size(); ++i) {
    while (r < ranges.size() && ranges[r].getEnd() <= keys[i])
      ++r;
    if (r < ranges.size() && ranges[r].getBegin() <= keys[i])
      return bad(where, "sparse key " + to_string(keys[i]) + " lies inside dense range " +
                          range_text(ranges[r].getBegin(), ranges[r].getEnd()));
  }
  return {};
}

// Embedding-table blocks (TableBlock): at most one per table, table indices
// increasing, dim positive, keys a whole number of UInt64, rows exactly
// n x dim Float32; in a push the keys strictly increasing and the rows finite.
caf::error check_table_block(const std::string& at, schema::TableBlock::Reader b,
                             const decode_limits& limits, bool is_push) {
  auto keys = b.getKeys();
  auto rows = b.getRows();
  if (b.getDim() == 0)
    return bad(at + ".dim", "must be positive");
  if (keys.size() % 8 != 0)
    return bad(at + ".keys", to_string(keys.size()) + " bytes are not a whole number of UInt64 keys");
  uint64_t n = keys.size() / 8;
  if (auto err = check_count(at + ".keys", n, limits.max_sparse_keys))
    return err;
  if (rows.size() != n * b.getDim() * 4)
    return bad(at + ".rows", to_string(rows.size()) + " bytes, but " + to_string(n) + " keys x dim " +
                               to_string(b.getDim()) + " need " + to_string(n * b.getDim() * 4) +
                               " (a block must be n x d float32)");
  if (is_push)
    for (uint64_t i = 1; i < n; ++i) {
      uint64_t prev, k;
      std::memcpy(&prev, keys.begin() + 8 * (i - 1), 8);
      std::memcpy(&k, keys.begin() + 8 * i, 8);
      if (k <= prev)
        return bad(at + ".keys[" + to_string(i) + "]",
                   "key " + to_string(k) + " is not greater than the one before (" + to_string(prev) +
                     "); a push's keys must be strictly increasing");
    }
  if (limits.require_finite && !(limits.source && limits.source->known_finite(rows.begin(), rows.size())) &&
      !all_finite(rows.begin(), n * b.getDim()))
    return bad(at + ".rows", "contains a NaN or infinite value");
  return {};
}

caf::error check_table_blocks(const std::string& where,
                              capnp::List<schema::TableBlock>::Reader blocks,
                              const decode_limits& limits, bool is_push) {
  if (auto err = check_count(where, blocks.size(), limits.max_dense_ranges))
    return err;
  for (unsigned i = 0; i < blocks.size(); ++i) {
    auto at = where + "[" + to_string(i) + "]";
    if (is_push && i > 0 && blocks[i].getTable() <= blocks[i - 1].getTable())
      return bad(at + ".table", to_string(blocks[i].getTable()) +
                                  " is not greater than the table before; one block a table, in order");
    if (auto err = check_table_block(at, blocks[i], limits, is_push))
      return err;
  }
  return {};
}

caf::error check_table_keys(const std::string& where, capnp::List<schema::TableKeys>::Reader tables,
                            const decode_limits& limits) {
  if (auto err = check_count(where, tables.size(), limits.max_dense_ranges))
    return err;
  for (unsigned i = 0; i < tables.size(); ++i) {
    auto at = where + "[" + to_string(i) + "]";
    if (i > 0 && tables[i].getTable() <= tables[i - 1].getTable())
      return bad(at + ".table", to_string(tables[i].getTable()) +
                                  " is not greater than the table before; one entry a table, in order");
    auto keys = tables[i].getKeys();
    if (keys.size() % 8 != 0)
      return bad(at + ".keys", to_string(keys.size()) + " bytes are not a whole number of UInt64 keys");
    if (auto err = check_count(at + ".keys", keys.size() / 8, limits.max_sparse_keys))
      return err;
  }
  return {};
}

}  // namespace

size_t dtype_size(schema::DType t) {
  switch (t) {
    case schema::DType::FLOAT32: return 4;
    case schema::DType::FLOAT64: return 8;
    case schema::DType::INT32: return 4;
    case schema::DType::INT64: return 8;
    case schema::DType::UINT8: return 1;
  }
  return 0;
}

bool all_finite(const void* p, size_t n) {
  // A float32 is NaN or infinite iff its exponent bits are all ones. The OR
  // over a block lets the compiler vectorise the scan, reading the values in
  // place (memcpy per value keeps unaligned input legal and compiles to
  // plain loads); a bad value ends the scan at the end of its block.
  const auto* bytes = static_cast<const unsigned char*>(p);
  constexpr size_t block = 4096;
  for (size_t i = 0; i < n; i += block) {
    const size_t m = n - i < block ? n - i : block;
    const unsigned char* b = bytes + i * 4;
    uint32_t bad_any = 0;
    for (size_t j = 0; j < m; ++j) {
      uint32_t v;
      std::memcpy(&v, b + j * 4, 4);
      bad_any |= static_cast<uint32_t>((v & 0x7f800000u) == 0x7f800000u);
    }
    if (bad_any != 0)
      return false;
  }
  return true;
}

bool copy_all_finite(void* dst, const void* src, size_t n) {
  // Block by block: a 16 KiB block is scanned right after it is copied,
  // while it is still in L1, so the values cross memory once.
  auto* out = static_cast<unsigned char*>(dst);
  const auto* in = static_cast<const unsigned char*>(src);
  constexpr size_t block = 4096;
  bool finite = true;
  for (size_t i = 0; i < n; i += block) {
    const size_t m = n - i < block ? n - i : block;
    std::memcpy(out + i * 4, in + i * 4, m * 4);
    if (finite)
      finite = all_finite(out + i * 4, m);
  }
  return finite;
}

caf::error validate(schema::Push::Reader m, const decode_limits& limits) {
  if (auto err = check_version("keel.Push", m.getVersion()))
    return err;
  if (m.getSeq() == 0)
    return bad("keel.Push.seq", "must be at least 1 (a worker counts its pushes from 1)");
  auto dense = m.getDense();
  if (auto err = check_dense("keel.Push.dense", dense, limits))
    return err;
  auto sparse = m.getSparse();
  if (auto err = check_sparse("keel.Push.sparse", sparse, limits))
    return err;
  if (auto err = check_table_blocks("keel.Push.tables", m.getTables(), limits, true))
    return err;
  return check_disjoint("keel.Push.sparse", dense, sparse.getKeys());
}

caf::error validate(schema::PushAck::Reader m, const decode_limits& limits) {
  if (auto err = check_version("keel.PushAck", m.getVersion()))
    return err;
  if (m.getSeq() == 0)
    return bad("keel.PushAck.seq", "must be at least 1");
  auto status = m.getStatus();
  if (status != schema::PushAck::Status::APPLIED && status != schema::PushAck::Status::DUPLICATE &&
      status != schema::PushAck::Status::REJECTED && status != schema::PushAck::Status::ACCEPTED &&
      status != schema::PushAck::Status::OUT_OF_ORDER)
    return bad("keel.PushAck.status", "unknown value " + to_string(static_cast<unsigned>(status)));
  if (status == schema::PushAck::Status::OUT_OF_ORDER && m.getExpectedSeq() == 0)
    return bad("keel.PushAck.expectedSeq", "must be at least 1 when the status is outOfOrder");
  return check_text("keel.PushAck.reason", m.getReason(), limits,
                    status == schema::PushAck::Status::REJECTED);
}

caf::error validate(schema::PullRequest::Reader m, const decode_limits& limits) {
  if (auto err = check_version("keel.PullRequest", m.getVersion()))
    return err;
  auto dense = m.getDense();
  if (auto err = check_count("keel.PullRequest.dense", dense.size(), limits.max_dense_ranges))
    return err;
  uint64_t prev_end = 0;
  for (unsigned i = 0; i < dense.size(); ++i) {
    auto at = "keel.PullRequest.dense[" + to_string(i) + "]";
    auto b = dense[i].getBegin();
    auto e = dense[i].getEnd();
    if (e <= b)
      return bad(at, "empty or inverted range " + range_text(b, e));
    if (i > 0 && b < prev_end)
      return bad(at, "range " + range_text(b, e) + " overlaps or precedes the previous one ending at " +
                       to_string(prev_end));
    prev_end = e;
  }
  auto keys = m.getSparseKeys();
  if (auto err = check_sparse_keys("keel.PullRequest.sparseKeys", keys, limits))
    return err;
  if (auto err = check_table_keys("keel.PullRequest.tables", m.getTables(), limits))
    return err;
  return check_disjoint("keel.PullRequest.sparseKeys", dense, keys);
}

caf::error validate(schema::PullReply::Reader m, const decode_limits& limits) {
  if (auto err = check_version("keel.PullReply", m.getVersion()))
    return err;
  auto dense = m.getDense();
  if (auto err = check_dense("keel.PullReply.dense", dense, limits))
    return err;
  auto sparse = m.getSparse();
  if (auto err = check_sparse("keel.PullReply.sparse", sparse, limits))
    return err;
  if (auto err = check_table_blocks("keel.PullReply.tables", m.getTables(), limits, false))
    return err;
  return check_disjoint("keel.PullReply.sparse", dense, sparse.getKeys());
}

caf::error validate(schema::SnapshotRequest::Reader m, const decode_limits&) {
  return check_version("keel.SnapshotRequest", m.getVersion());
}

caf::error validate(schema::ShardSnapshot::Reader m, const decode_limits& limits) {
  if (auto err = check_version("keel.ShardSnapshot", m.getVersion()))
    return err;
  if (m.getMagic() != schema::SNAPSHOT_MAGIC)
    return bad("keel.ShardSnapshot.magic", "is not KEELSNAP");
  if (m.getFormatVersion() != 1)
    return make_error(errc::unsupported_version, "keel.ShardSnapshot.formatVersion: " +
                                                   to_string(m.getFormatVersion()) +
                                                   " (this build reads format 1)");
  auto applied = m.getApplied();
  if (auto err = check_count("keel.ShardSnapshot.applied", applied.size(), limits.max_list_entries))
    return err;
  for (unsigned i = 1; i < applied.size(); ++i)
    if (applied[i].getWorker() <= applied[i - 1].getWorker())
      return bad("keel.ShardSnapshot.applied[" + to_string(i) + "]",
                 "workers must be strictly increasing (worker " + to_string(applied[i].getWorker()) +
                   " after " + to_string(applied[i - 1].getWorker()) + ")");
  auto tensors = m.getTensors();
  if (auto err = check_count("keel.ShardSnapshot.tensors", tensors.size(), limits.max_tensors))
    return err;
  std::set<std::string> names;
  for (unsigned i = 0; i < tensors.size(); ++i) {
    auto t = tensors[i];
    auto at = "keel.ShardSnapshot.tensors[" + to_string(i) + "]";
    if (auto err = check_text(at + ".name", t.getName(), limits, true))
      return err;
    std::string name = t.getName().cStr();
    at = "keel.ShardSnapshot.tensors['" + name + "']";
    if (!names.insert(name).second)
      return bad(at, "name appears twice");
    auto elem = dtype_size(t.getDtype());
    if (elem == 0)
      return bad(at + ".dtype", "unknown value " + to_string(static_cast<unsigned>(t.getDtype())));
    auto shape = t.getShape();
    if (shape.size() > limits.max_tensor_rank)
      return make_error(errc::limit_exceeded, at + ".shape: rank " + to_string(shape.size()) +
                                                " exceeds " + to_string(limits.max_tensor_rank));
    uint64_t count = 1;
    for (auto d : shape) {
      if (d != 0 && count > std::numeric_limits<uint64_t>::max() / elem / d)
        return bad(at + ".shape", "element count overflows");
      count *= d;
    }
    uint64_t bytes = 0;
    for (auto c : t.getChunks())
      bytes += c.size();
    if (bytes != count * elem)
      return bad(at, "chunks hold " + to_string(bytes) + " bytes, shape and dtype need " +
                       to_string(count * elem));
  }
  auto sections = m.getSections();
  if (auto err = check_count("keel.ShardSnapshot.sections", sections.size(), limits.max_list_entries))
    return err;
  std::set<std::string> section_names;
  for (unsigned i = 0; i < sections.size(); ++i) {
    auto at = "keel.ShardSnapshot.sections[" + to_string(i) + "].name";
    if (auto err = check_text(at, sections[i].getName(), limits, true))
      return err;
    if (!section_names.insert(sections[i].getName().cStr()).second)
      return bad(at, "'" + std::string(sections[i].getName().cStr()) + "' appears twice");
  }
  return {};
}

namespace {

// A file name inside the checkpoint directory: no path, no way out of it.
caf::error check_file_name(const std::string& at, capnp::Text::Reader file, const decode_limits& limits) {
  if (auto err = check_text(at, file, limits, true))
    return err;
  std::string f = file.cStr();
  if (f == "." || f == ".." || f.find('/') != std::string::npos)
    return bad(at, "'" + f + "' is not a plain file name");
  return {};
}

}  // namespace

caf::error validate(schema::CheckpointManifest::Reader m, const decode_limits& limits) {
  if (auto err = check_version("keel.CheckpointManifest", m.getVersion()))
    return err;
  auto shards = m.getShards();
  if (auto err = check_count("keel.CheckpointManifest.shards", shards.size(), limits.max_list_entries))
    return err;
  std::set<uint32_t> seen;
  for (unsigned i = 0; i < shards.size(); ++i) {
    auto at = "keel.CheckpointManifest.shards[" + to_string(i) + "]";
    if (!seen.insert(shards[i].getShard()).second)
      return bad(at + ".shard", "shard " + to_string(shards[i].getShard()) + " appears twice");
    if (auto err = check_file_name(at + ".file", shards[i].getFile(), limits))
      return err;
    auto chain = shards[i].getChain();
    if (auto err = check_count(at + ".chain", chain.size(), limits.max_list_entries))
      return err;
    for (unsigned j = 0; j < chain.size(); ++j)
      if (auto err = check_file_name(at + ".chain[" + to_string(j) + "].file", chain[j].getFile(), limits))
        return err;
  }
  return {};
}

caf::error validate(schema::DirectoryUpdate::Reader m, const decode_limits& limits) {
  if (auto err = check_version("keel.DirectoryUpdate", m.getVersion()))
    return err;
  if (auto err = check_text("keel.DirectoryUpdate.name", m.getName(), limits, true))
    return err;
  auto s = m.getState();
  if (s != schema::DirectoryUpdate::State::UP && s != schema::DirectoryUpdate::State::RESTARTING &&
      s != schema::DirectoryUpdate::State::GONE)
    return bad("keel.DirectoryUpdate.state", "unknown value " + to_string(static_cast<unsigned>(s)));
  return check_text("keel.DirectoryUpdate.node", m.getNode(), limits, false);
}

caf::error validate(schema::Heartbeat::Reader m, const decode_limits& limits) {
  if (auto err = check_version("keel.Heartbeat", m.getVersion()))
    return err;
  return check_text("keel.Heartbeat.node", m.getNode(), limits, true);
}

caf::error validate(schema::NodeJoin::Reader m, const decode_limits& limits) {
  if (auto err = check_version("keel.NodeJoin", m.getVersion()))
    return err;
  if (auto err = check_text("keel.NodeJoin.node", m.getNode(), limits, true))
    return err;
  // A client (a coordinator) listens nowhere, so it may leave host empty.
  if (auto err = check_text("keel.NodeJoin.host", m.getHost(), limits, m.getRole() == schema::NodeJoin::Role::NODE))
    return err;
  if (m.getRole() > schema::NodeJoin::Role::CLIENT)
    return bad("keel.NodeJoin.role", "unknown role " + to_string(static_cast<unsigned>(m.getRole())));
  if (m.getPort() == 0 && m.getRole() == schema::NodeJoin::Role::NODE)
    return bad("keel.NodeJoin.port", "must not be 0 for a node");
  if (m.getChallenge().size() != 0 && m.getChallenge().size() != 32)
    return bad("keel.NodeJoin.challenge", "must be empty or 32 bytes, not " + to_string(m.getChallenge().size()));
  if (m.getProof().size() != 0 && m.getProof().size() != 32)
    return bad("keel.NodeJoin.proof", "must be empty or 32 bytes, not " + to_string(m.getProof().size()));
  auto types = m.getActorTypes();
  if (auto err = check_count("keel.NodeJoin.actorTypes", types.size(), limits.max_list_entries))
    return err;
  for (unsigned i = 0; i < types.size(); ++i)
    if (auto err = check_text("keel.NodeJoin.actorTypes[" + to_string(i) + "]", types[i], limits, true))
      return err;
  return {};
}


}  // namespace keel
