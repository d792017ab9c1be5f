#include "storage/snapshot.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

#include <kj/exception.h>

#include "messages/errors.hpp"
#include "messages/validate.hpp"
#include "storage/crc32c.hpp"
#include "storage/snapshot_build.hpp"

namespace keel {

namespace {

size_t words_for(size_t bytes) {
  return (bytes + 7) / 8;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

caf::error bad_argument(const std::string& what) {
  return make_error(errc::invalid_argument, "make_snapshot: " + what);
}

// `fills[i]`, when not null, writes tensor i's bytes (its view has no data).
caf::error check_tensors(const std::vector<tensor_view>& tensors,
                         const std::vector<const tensor_fill*>& fills) {
  std::set<std::string> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto& t = tensors[i];
    if (fills[i] && !*fills[i])
      return bad_argument("tensor '" + t.name + "' has no fill");
    if (t.name.empty())
      return bad_argument("a tensor has an empty name");
    if (!names.insert(t.name).second)
      return bad_argument("tensor '" + t.name + "' appears twice");
    auto elem = dtype_size(t.dtype);
    if (elem == 0)
      return bad_argument("tensor '" + t.name + "' has an unknown dtype");
    uint64_t count = 1;
    for (auto d : t.shape) {
      if (d != 0 && count > std::numeric_limits<uint64_t>::max() / elem / d)
        return bad_argument("tensor '" + t.name + "': element count of shape " +
                            shape_text(t.shape) + " overflows");
      count *= d;
    }
    if (count * elem != t.bytes)
      return bad_argument("tensor '" + t.name + "' has " + std::to_string(t.bytes) +
                          " bytes, but shape " + shape_text(t.shape) + " of " +
                          dtype_name(t.dtype) + " needs " + std::to_string(count * elem));
    if (t.bytes > 0 && t.data == nullptr && !fills[i])
      return bad_argument("tensor '" + t.name + "' has no data");
  }
  return {};
}

caf::error check_sections(const std::vector<section_view>& sections) {
  std::set<std::string> names;
  for (auto& s : sections) {
    if (s.name.empty())
      return bad_argument("a section has an empty name");
    if (!names.insert(s.name).second)
      return bad_argument("section '" + s.name + "' appears twice");
    if (s.bytes > 0 && s.data == nullptr)
      return bad_argument("section '" + s.name + "' has no data");
  }
  return {};
}

// An upper bound of the message size, so it fits one segment: a reader then
// sees one contiguous buffer, and the write is one stream of pieces. Chunks
// that are segments of their own (`external`, for the tensors with a fill)
// are not counted.
size_t size_hint_words(const snapshot_header& h, const std::vector<tensor_view>& tensors,
                       const std::vector<const tensor_fill*>& fills, const std::vector<section_view>& sections,
                       size_t chunk_bytes, bool external) {
  size_t words = 32 + 2 * h.applied.size() + words_for(h.run_id.size() + 1) +
                 words_for(h.config_hash.size() + 1) + words_for(h.parent_file.size() + 1);
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto& t = tensors[i];
    size_t chunks = (t.bytes + chunk_bytes - 1) / chunk_bytes;
    words += 8 + words_for(t.name.size() + 1) + t.shape.size() + chunks * 2;
    words += external && fills[i] ? chunks * 2 : words_for(t.bytes);  // far pointers' landing pads
  }
  for (auto& s : sections)
    words += 8 + words_for(s.name.size() + 1) + words_for(s.bytes);
  return words;
}

void fill_tensor(frame_builder& fb, schema::Tensor::Builder out, const tensor_view& t, const tensor_fill* fill,
                 size_t chunk_bytes, const unsigned char* external) {
  out.setName(t.name);
  out.setDtype(t.dtype);
  auto shape = out.initShape(static_cast<unsigned>(t.shape.size()));
  for (unsigned i = 0; i < t.shape.size(); ++i)
    shape.set(i, t.shape[i]);
  size_t n_chunks = (t.bytes + chunk_bytes - 1) / chunk_bytes;
  auto chunks = out.initChunks(static_cast<unsigned>(n_chunks));
  if (fill && external) {  // chunks left to the caller: all name the same buffer for now
    for (size_t i = 0; i < n_chunks; ++i) {
      size_t len = std::min(chunk_bytes, t.bytes - i * chunk_bytes);
      chunks.adopt(static_cast<unsigned>(i), fb.reference_data(external, len));
    }
    return;
  }
  if (fill) {
    std::vector<byte_span> spans;
    spans.reserve(n_chunks);
    for (size_t i = 0; i < n_chunks; ++i) {
      size_t len = std::min(chunk_bytes, t.bytes - i * chunk_bytes);
      spans.push_back({chunks.init(static_cast<unsigned>(i), static_cast<unsigned>(len)).begin(), len});
    }
    span_list_source source(spans);
    out.setCrc32c((*fill)(source));
    return;
  }
  const auto* src = static_cast<const unsigned char*>(t.data);
  uint32_t crc = crc32c_empty;
  for (size_t i = 0; i < n_chunks; ++i) {
    size_t len = std::min(chunk_bytes, t.bytes - i * chunk_bytes);
    auto chunk = chunks.init(static_cast<unsigned>(i), static_cast<unsigned>(len));
    std::memcpy(chunk.begin(), src + i * chunk_bytes, len);
    // Checksum the copy, not the source: it is what will be stored, and it
    // is in cache right now.
    crc = crc32c_extend(crc, chunk.begin(), len);
  }
  out.setCrc32c(crc);
}

}  // namespace

caf::error build_snapshot_into(frame_builder& fb, const snapshot_header& header, const std::vector<tensor_view>& tensors,
                               const std::vector<const tensor_fill*>& fills, const std::vector<section_view>& sections,
                               size_t chunk_bytes, const unsigned char* external,
                               std::vector<schema::Tensor::Builder>* filled_later) {
  if (chunk_bytes == 0 || chunk_bytes > (size_t{1} << 28))
    return bad_argument("chunk size " + std::to_string(chunk_bytes) + " is not in (0, 256 MiB]");
  if (auto err = check_tensors(tensors, fills))
    return err;
  if (auto err = check_sections(sections))
    return err;
  auto applied = header.applied;
  std::sort(applied.begin(), applied.end(),
            [](const applied_seq& a, const applied_seq& b) { return a.worker < b.worker; });
  for (size_t i = 1; i < applied.size(); ++i)
    if (applied[i].worker == applied[i - 1].worker)
      return bad_argument("worker " + std::to_string(applied[i].worker) +
                          " appears twice in applied");
  auto b = fb.message().initRoot<schema::ShardSnapshot>();
  b.setVersion(schema::PROTOCOL_VERSION);
  b.setMagic(schema::SNAPSHOT_MAGIC);
  b.setFormatVersion(snapshot_format_version);
  b.setShard(header.shard);
  b.setCheckpoint(header.checkpoint);
  b.setStep(header.step);
  b.setShardVersion(header.shard_version);
  b.setCreatedUnixMs(header.created_unix_ms);
  b.setRunId(header.run_id);
  b.setConfigHash(header.config_hash);
  if (!header.parent_file.empty())
    b.setParentFile(header.parent_file);
  b.setParentCheckpoint(header.parent_checkpoint);
  b.setBaseCheckpoint(header.parent_file.empty() && header.base_checkpoint == 0 ? header.checkpoint
                                                                                : header.base_checkpoint);
  auto a = b.initApplied(static_cast<unsigned>(applied.size()));
  for (unsigned i = 0; i < applied.size(); ++i) {
    a[i].setWorker(applied[i].worker);
    a[i].setSeq(applied[i].seq);
  }
  auto ts = b.initTensors(static_cast<unsigned>(tensors.size()));
  for (unsigned i = 0; i < tensors.size(); ++i) {
    fill_tensor(fb, ts[i], tensors[i], fills[i], chunk_bytes, external);
    if (external && fills[i])
      filled_later->push_back(ts[i]);
  }
  auto ss = b.initSections(static_cast<unsigned>(sections.size()));
  for (unsigned i = 0; i < sections.size(); ++i) {
    ss[i].setName(sections[i].name);
    auto data = ss[i].initData(static_cast<unsigned>(sections[i].bytes));
    if (sections[i].bytes > 0)
      std::memcpy(data.begin(), sections[i].data, sections[i].bytes);
    ss[i].setCrc32c(crc32c(data.begin(), data.size()));
  }
  return {};
}

size_t snapshot_size_hint(const snapshot_header& header, const std::vector<tensor_view>& tensors,
                          const std::vector<const tensor_fill*>& fills, const std::vector<section_view>& sections,
                          size_t chunk_bytes, bool external) {
  return size_hint_words(header, tensors, fills, sections, chunk_bytes, external);
}

namespace {

caf::expected<shard_snapshot_msg> build_snapshot(const snapshot_header& header,
                                                 const std::vector<tensor_view>& tensors,
                                                 const std::vector<const tensor_fill*>& fills,
                                                 const std::vector<section_view>& sections,
                                                 size_t chunk_bytes, std::shared_ptr<buffer_pool> pool) {
  frame_builder fb(size_hint_words(header, tensors, fills, sections, chunk_bytes, false), std::move(pool));
  if (auto err = build_snapshot_into(fb, header, tensors, fills, sections, chunk_bytes, nullptr, nullptr))
    return err;
  return shard_snapshot_msg(fb.finish());
}

}  // namespace

caf::expected<shard_snapshot_msg> make_snapshot(const snapshot_header& header,
                                                const std::vector<tensor_view>& tensors,
                                                const std::vector<section_view>& sections,
                                                size_t chunk_bytes, std::shared_ptr<buffer_pool> pool) {
  std::vector<const tensor_fill*> copied(tensors.size(), nullptr);
  return build_snapshot(header, tensors, copied, sections, chunk_bytes, std::move(pool));
}

caf::expected<shard_snapshot_msg> make_snapshot(const snapshot_header& header,
                                                const std::vector<tensor_view>& tensors,
                                                const std::vector<tensor_writer>& written,
                                                size_t chunk_bytes, std::shared_ptr<buffer_pool> pool) {
  auto all = tensors;
  std::vector<const tensor_fill*> fills(tensors.size(), nullptr);
  for (auto& w : written) {
    all.push_back({w.name, w.dtype, w.shape, nullptr, w.bytes});
    fills.push_back(&w.fill);
  }
  return build_snapshot(header, all, fills, {}, chunk_bytes, std::move(pool));
}

namespace {

caf::error verify_each_checksum(schema::ShardSnapshot::Reader s, const std::vector<std::string>& except) {
  auto tensors = s.getTensors();
  for (auto t : tensors) {
    if (std::find(except.begin(), except.end(), t.getName().cStr()) != except.end())
      continue;
    uint32_t crc = crc32c_empty;
    for (auto c : t.getChunks())
      crc = crc32c_extend(crc, c.begin(), c.size());
    if (auto err = check_tensor_crc(t, crc))
      return err;
  }
  for (auto sec : s.getSections()) {
    auto data = sec.getData();
    auto crc = crc32c(data.begin(), data.size());
    if (crc != sec.getCrc32c())
      return make_error(errc::damaged_snapshot,
                        "section '" + std::string(sec.getName().cStr()) +
                          "': CRC32C mismatch (stored " + hex32(sec.getCrc32c()) + ", computed " +
                          hex32(crc) + ")");
  }
  return {};
}

}  // namespace

caf::error check_tensor_crc(schema::Tensor::Reader t, uint32_t computed) {
  if (computed == t.getCrc32c())
    return {};
  return make_error(errc::damaged_snapshot, "tensor '" + std::string(t.getName().cStr()) +
                                              "': CRC32C mismatch (stored " + hex32(t.getCrc32c()) +
                                              ", computed " + hex32(computed) + ")");
}

caf::error verify_checksums(schema::ShardSnapshot::Reader s) {
  return verify_checksums(s, {});
}

caf::error verify_checksums(schema::ShardSnapshot::Reader s, const std::vector<std::string>& except) {
  // decode has validated the snapshot, but a hostile one can make its chunk
  // pointers share one blob, so that each walk over the chunks reads the
  // blob many times; the reader's traversal limit then throws part-way
  // through a later walk such as this one (tests/fuzz/regressions/
  // fuzz_snapshot_file). That is damage like any other: refuse it as a value.
  try {
    return verify_each_checksum(s, except);
  } catch (const kj::Exception& e) {
    return make_error(errc::damaged_snapshot,
                      std::string("unreadable while checking its CRCs: ") + e.getDescription().cStr());
  }
}

uint64_t tensor_bytes(schema::Tensor::Reader t) {
  uint64_t n = 0;
  for (auto c : t.getChunks())
    n += c.size();
  return n;
}

caf::error copy_tensor(schema::Tensor::Reader t, void* out, size_t out_bytes) {
  auto chunks = t.getChunks();
  auto need = tensor_bytes(t);
  if (need != out_bytes)
    return make_error(errc::invalid_argument, "tensor '" + std::string(t.getName().cStr()) +
                                                "' holds " + std::to_string(need) +
                                                " bytes, the destination " +
                                                std::to_string(out_bytes));
  auto* dst = static_cast<unsigned char*>(out);
  for (auto c : chunks) {
    if (c.size() == 0)
      continue;
    std::memcpy(dst, c.begin(), c.size());
    dst += c.size();
  }
  return {};
}

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i > 0 ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string shape_text(capnp::List<uint64_t>::Reader shape) {
  std::vector<uint64_t> v;
  v.reserve(shape.size());
  for (auto d : shape)
    v.push_back(d);
  return shape_text(v);
}

std::vector<uint64_t> shape_of(schema::Tensor::Reader t) {
  std::vector<uint64_t> v;
  for (auto d : t.getShape())
    v.push_back(d);
  return v;
}

const char* dtype_name(schema::DType t) {
  switch (t) {
    case schema::DType::FLOAT32: return "float32";
    case schema::DType::FLOAT64: return "float64";
    case schema::DType::INT32: return "int32";
    case schema::DType::INT64: return "int64";
    case schema::DType::UINT8: return "uint8";
  }
  return "unknown";
}

}  // namespace keel
