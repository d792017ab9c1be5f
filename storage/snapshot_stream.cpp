#include "storage/snapshot_stream.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <stdexcept>

#include "messages/errors.hpp"
#include "messages/frame.hpp"
#include "storage/crc32c.hpp"
#include "storage/error_context.hpp"
#include "storage/snapshot_build.hpp"

namespace keel {

namespace {

namespace fs = std::filesystem;
using segments_t = kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>>;

// An I/O error met while a fill runs, carried out of it.
struct stream_failure {
  caf::error error;
};

// Where each segment lies in the payload, and the CRC of each once written.
struct payload_plan {
  std::vector<unsigned char> table;  // the capnp segment table
  std::vector<uint64_t> offset;      // of each segment, in the file
  std::vector<uint32_t> crc;         // of each segment's bytes
  std::vector<size_t> external;      // the segments that are fills' chunks, in order
};

payload_plan plan_payload(segments_t segs, const capnp::word* scratch) {
  payload_plan p;
  const size_t table_words = (segs.size() + 2) / 2;
  p.table.assign(table_words * sizeof(capnp::word), 0);
  const auto count_minus_one = static_cast<uint32_t>(segs.size() - 1);
  std::memcpy(p.table.data(), &count_minus_one, 4);
  uint64_t at = sealed_header_bytes + p.table.size();
  for (size_t i = 0; i < segs.size(); ++i) {
    const auto words = static_cast<uint32_t>(segs[i].size());
    std::memcpy(p.table.data() + 4 + 4 * i, &words, 4);
    p.offset.push_back(at);
    at += uint64_t{words} * sizeof(capnp::word);
    if (segs[i].begin() == scratch)
      p.external.push_back(i);
  }
  p.crc.assign(segs.size(), crc32c_empty);
  return p;
}

caf::error write_all(writable_file& f, uint64_t offset, const unsigned char* p, size_t n) {
  while (n > 0) {
    const size_t piece = std::min(n, sealed_io_piece_bytes);
    if (auto err = f.write_at(offset, p, piece))
      return err;
    offset += piece, p += piece, n -= piece;
  }
  return {};
}

// Hands a fill the scratch buffer for each of its tensor's chunks in turn;
// a chunk is written to the file (zero-padded to whole words) when the
// next is asked for, or at finish().
class chunk_stream final : public span_source {
 public:
  chunk_stream(writable_file& f, payload_plan& plan, unsigned char* scratch, size_t first, size_t chunks,
               size_t tensor_bytes, size_t chunk_bytes)
      : f_(f), plan_(plan), scratch_(scratch), next_(first), end_(first + chunks), tensor_bytes_(tensor_bytes),
        chunk_bytes_(chunk_bytes) {}

  byte_span next() override {
    flush();
    if (next_ == end_)
      return {};
    len_ = std::min(chunk_bytes_, tensor_bytes_ - given_ * chunk_bytes_);
    ++given_;
    open_ = next_++;
    return {scratch_, len_};
  }

  // Writes the last chunk; false if the fill asked for fewer chunks than
  // its tensor has.
  bool finish() {
    flush();
    return next_ == end_;
  }

 private:
  void flush() {
    if (open_ == npos)
      return;
    const size_t padded = (len_ + 7) / 8 * 8;
    std::memset(scratch_ + len_, 0, padded - len_);
    const size_t seg = plan_.external[open_];
    plan_.crc[seg] = crc32c(scratch_, padded);
    if (auto err = write_all(f_, plan_.offset[seg], scratch_, padded))
      throw stream_failure{std::move(err)};
    open_ = npos;
  }

  static constexpr size_t npos = SIZE_MAX;
  writable_file& f_;
  payload_plan& plan_;
  unsigned char* scratch_;
  size_t next_, end_;
  size_t tensor_bytes_, chunk_bytes_;
  size_t given_ = 0, len_ = 0, open_ = npos;
};

caf::error invalid(const std::string& what) {
  return make_error(errc::invalid_argument, "stream_snapshot: " + what);
}

// Steps 2 and 3 of the header's comment, into the open file.
caf::expected<sealed_summary> write_payload(writable_file& f, frame_builder& fb, const std::vector<tensor_writer>& written,
                                            std::vector<schema::Tensor::Builder>& filled_later,
                                            std::vector<capnp::word>& scratch, size_t chunk_bytes) {
  auto segs = fb.message().getSegmentsForOutput();
  auto plan = plan_payload(segs, scratch.data());
  auto* buf = reinterpret_cast<unsigned char*>(scratch.data());
  size_t first = 0;
  for (size_t w = 0; w < written.size(); ++w) {
    const size_t chunks = (written[w].bytes + chunk_bytes - 1) / chunk_bytes;
    if (first + chunks > plan.external.size())
      return invalid("the message has fewer chunk segments than its tensors' chunks");
    chunk_stream stream(f, plan, buf, first, chunks, written[w].bytes, chunk_bytes);
    uint32_t crc = 0;
    try {
      crc = written[w].fill(stream);
      if (!stream.finish())
        return invalid("tensor '" + written[w].name + "' wrote fewer bytes than its " +
                       std::to_string(written[w].bytes));
    } catch (stream_failure& e) {
      return std::move(e.error);
    } catch (std::exception& e) {
      return invalid("tensor '" + written[w].name + "': " + e.what());
    }
    filled_later[w].setCrc32c(crc);
    first += chunks;
  }
  if (first != plan.external.size())
    return invalid("the message has more chunk segments than its tensors' chunks");
  segs = fb.message().getSegmentsForOutput();  // setting the CRCs allocated nothing
  for (size_t i = 0; i < segs.size(); ++i) {
    if (segs[i].begin() == scratch.data())
      continue;
    const auto* p = reinterpret_cast<const unsigned char*>(segs[i].begin());
    const size_t n = segs[i].size() * sizeof(capnp::word);
    plan.crc[i] = crc32c(p, n);
    if (auto err = write_all(f, plan.offset[i], p, n))
      return err;
  }
  if (auto err = write_all(f, sealed_header_bytes, plan.table.data(), plan.table.size()))
    return err;
  uint32_t crc = crc32c(plan.table.data(), plan.table.size());
  uint64_t end = sealed_header_bytes + plan.table.size();
  for (size_t i = 0; i < segs.size(); ++i) {
    const uint64_t n = segs[i].size() * sizeof(capnp::word);
    crc = crc32c_combine(crc, plan.crc[i], n);
    end += n;
  }
  const auto header = sealed_header(snapshot_file_magic, end - sealed_header_bytes, crc);
  if (auto err = f.write_at(0, header.data(), header.size()))
    return err;
  return sealed_summary{end, crc};
}

}  // namespace

caf::expected<streamed_snapshot> stream_snapshot(file_io& io, const fs::path& dir, const std::string& name,
                                                 const std::string& tmp_tag, const snapshot_header& header,
                                                 const std::vector<tensor_view>& tensors,
                                                 const std::vector<tensor_writer>& written, size_t chunk_bytes) {
  if (chunk_bytes == 0 || chunk_bytes > (size_t{1} << 28))
    return invalid("chunk size " + std::to_string(chunk_bytes) + " is not in (0, 256 MiB]");
  auto all = tensors;
  std::vector<const tensor_fill*> fills(tensors.size(), nullptr);
  for (auto& w : written) {
    all.push_back({w.name, w.dtype, w.shape, nullptr, w.bytes});
    fills.push_back(&w.fill);
  }
  // The chunks' buffer: whole words, so each chunk is a segment of its own.
  std::vector<capnp::word> scratch((chunk_bytes + 7) / 8);
  frame_builder fb(snapshot_size_hint(header, all, fills, {}, chunk_bytes, true));
  std::vector<schema::Tensor::Builder> filled_later;
  if (auto err = build_snapshot_into(fb, header, all, fills, {}, chunk_bytes,
                                     reinterpret_cast<const unsigned char*>(scratch.data()), &filled_later))
    return err;
  const fs::path tmp = dir / (name + ".tmp-" + tmp_tag);
  auto context = [&](const caf::error& e) { return in_context(e, "writing " + name + ": "); };
  auto file = io.create(tmp);
  if (!file)
    return context(file.error());
  auto summary = write_payload(**file, fb, written, filled_later, scratch, chunk_bytes);
  if (!summary) {
    file->reset();
    io.remove(tmp);  // best effort: the store's open() removes what is left
    return context(summary.error());
  }
  return streamed_snapshot{std::move(*file), dir, name, header.shard, *summary};
}

caf::expected<manifest_entry> commit_streamed(file_io& io, streamed_snapshot s) {
  if (auto err = commit_sealed(io, std::move(s.file), s.dir, s.name))
    return err;
  return manifest_entry{s.shard, s.name, s.summary.file_bytes, s.summary.payload_crc32c, 0, 0, {}};
}

}  // namespace keel
