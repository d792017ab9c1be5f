// The fuzz corpus as a regular test: every seed under corpus/<target>/ and
// every crash input saved under regressions/<target>/ goes through the same
// entry point its libFuzzer program calls, so CI re-checks each finding
// without libFuzzer. A broken invariant, or an exception escaping a decoder,
// fails a check that names the input file and what broke.

#include <random>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <caf/binary_deserializer.hpp>
#include <doctest/doctest.h>
#include <kj/exception.h>

#include "actors/core/shard_snapshot.hpp"
#include "fuzz_targets.hpp"
#include "invariant.hpp"
#include "memory_io.hpp"
#include "protocol_schemas.hpp"
#include "seed_corpus.hpp"
#include "storage/checkpoint_files.hpp"

using namespace keel;
using namespace keel::fuzz;
namespace fs = std::filesystem;

namespace {

const fs::path fuzz_dir = KEEL_FUZZ_DIR;

std::vector<unsigned char> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The files of `dir`, sorted (none if it does not exist).
std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  if (fs::is_directory(dir))
    for (auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file())
        out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

fuzz_entry entry_of(const std::string& target) {
  for (auto& t : all_targets())
    if (t.name == target)
      return t.entry;
  FAIL("no fuzz target " << target);
  return nullptr;
}

// What went wrong when `entry` ran `bytes`: nothing (an empty string), the
// invariant it reports broken, or an exception that escaped the decoders
// (which promise to return errors as values).
std::string failure_of(fuzz_entry entry, const std::vector<unsigned char>& bytes) {
  try {
    int result = entry(bytes.data(), bytes.size());
    return result == 0 ? std::string() : "returned " + std::to_string(result) + " instead of 0";
  } catch (const invariant_violation& e) {
    return e.what();
  } catch (const kj::Exception& e) {
    return std::string("threw a kj::Exception: ") + e.getDescription().cStr();
  } catch (const std::exception& e) {
    return std::string("threw a std::exception: ") + e.what();
  } catch (...) {
    return "threw an exception of an unknown type";
  }
}

// Runs every seed and regression input of `target`, checking each on its
// own; returns how many.
size_t replay(const std::string& target) {
  auto entry = entry_of(target);
  size_t n = 0;
  for (const auto* kind : {"corpus", "regressions"})
    for (auto& p : files_in(fuzz_dir / kind / target)) {
      // Printed before the call: a decoder that crashes (a signal, a
      // sanitizer report) ends the process before doctest can name the input.
      std::fprintf(stderr, "replaying %s\n", p.string().c_str());
      auto failure = failure_of(entry, read_bytes(p));
      CHECK_MESSAGE(failure.empty(), "input ", p.string(), ": ", failure);
      ++n;
    }
  return n;
}

}  // namespace

TEST_CASE("every seed and regression input of fuzz_frame_decode is decoded or refused without a fault") {
  CHECK(replay("fuzz_frame_decode") >= protocol_schema_count);
}

TEST_CASE("every seed and regression input of fuzz_caf_deserialize is loaded or refused without a fault") {
  CHECK(replay("fuzz_caf_deserialize") >= protocol_schema_count);
}

TEST_CASE("every seed and regression input of fuzz_snapshot_file is read and restored or refused without a fault") {
  CHECK(replay("fuzz_snapshot_file") > 0);
}

TEST_CASE("every seed and regression input of fuzz_manifest_file is read or refused without a fault") {
  CHECK(replay("fuzz_manifest_file") > 0);
}

TEST_CASE("every seed and regression input of fuzz_shard_messages is handled by a shard or refused without a fault") {
  CHECK(replay("fuzz_shard_messages") > 0);
}

TEST_CASE("every seed and regression input of fuzz_table_delta is applied to its table or refused without a fault") {
  CHECK(replay("fuzz_table_delta") >= 5);
}

TEST_CASE("20000 seeded mutations of the table delta seeds are applied or refused without a fault") {
  // A small fuzzer of its own, run in every build: bits flipped, bytes set,
  // the tail cut or the flags changed, on seeds resealed by the harness so
  // that most mutations reach the checks behind the CRC.
  auto entry = entry_of("fuzz_table_delta");
  std::vector<std::vector<unsigned char>> seeds;
  for (auto& p : files_in(fuzz_dir / "corpus" / "fuzz_table_delta")) seeds.push_back(read_bytes(p));
  REQUIRE(seeds.size() >= 5);
  std::mt19937_64 rng(2026);
  size_t failures = 0;
  for (int i = 0; i < 20000; ++i) {
    auto input = seeds[rng() % seeds.size()];
    input[0] |= 1;  // resealed
    for (int m = 0, n = 1 + static_cast<int>(rng() % 4); m < n; ++m) {
      auto at = 1 + rng() % (input.size() - 1);
      switch (rng() % 4) {
        case 0: input[at] ^= static_cast<unsigned char>(1u << (rng() % 8)); break;
        case 1: input[at] = static_cast<unsigned char>(rng()); break;
        case 2: input.resize(at); break;
        default: input[0] = static_cast<unsigned char>(rng() & 15); break;
      }
      if (input.size() < 2)
        break;
    }
    auto failure = failure_of(entry, input);
    if (!failure.empty() && ++failures <= 3)
      FAIL_CHECK("mutation " << i << ": " << failure);
  }
  CHECK(failures == 0);
}

TEST_CASE("the seed corpus in the repository is exactly what the corpus generator writes") {
  // Plain references, not structured bindings: doctest's INFO captures its
  // arguments in a lambda, and C++17 lambdas cannot capture a binding.
  for (const auto& generated : seed_corpus()) {
    const std::string& target = generated.first;
    const auto& seeds = generated.second;
    auto committed = files_in(fuzz_dir / "corpus" / target);
    std::vector<std::string> names;
    for (auto& p : committed)
      names.push_back(p.filename().string());
    std::vector<std::string> expected;
    for (auto& [name, bytes] : seeds)
      expected.push_back(name);
    INFO("target ", target, ": regenerate with keel_fuzz_corpus_generator tests/fuzz/corpus");
    CHECK(names == expected);
    for (auto& p : committed) {
      auto i = seeds.find(p.filename().string());
      if (i != seeds.end()) {
        INFO("seed ", p.string());
        CHECK(read_bytes(p) == i->second);
      }
    }
  }
}

TEST_CASE("every message seed is a message that decode accepts, so fuzzing starts past the parser") {
  auto pool = buffer_pool::create();
  auto corpus = seed_corpus();
  for (const auto& seed : corpus.at("fuzz_frame_decode")) {
    const std::string& name = seed.first;
    const auto& bytes = seed.second;
    INFO("seed ", name);
    auto f = frame::parse_copy(bytes.data() + 1, bytes.size() - 1, *pool);
    REQUIRE(f);
    visit_schema(bytes[0], [&](auto tag) {
      auto d = decode<typename decltype(tag)::type>(*f);
      CHECK_MESSAGE(d, (d ? std::string() : describe(d.error())));
    });
  }
}

TEST_CASE("every whole-file snapshot and manifest seed is accepted by its reader") {
  auto pool = buffer_pool::create();
  memory_io io;
  size_t snapshots = 0, manifests = 0;
  auto corpus = seed_corpus();
  for (const auto& seed : corpus.at("fuzz_snapshot_file")) {
    const std::string& name = seed.first;
    const auto& bytes = seed.second;
    io.put("/seed/" + name, memory_io::bytes(bytes.begin() + 1, bytes.end()));
    if ((bytes[0] & 1) != 0)
      continue;  // a payload only: the harness seals it
    INFO("seed ", name);
    auto s = read_snapshot_file(io, "/seed/" + name, *pool);
    CHECK_MESSAGE(s, (s ? std::string() : describe(s.error())));
    ++snapshots;
  }
  for (const auto& seed : corpus.at("fuzz_manifest_file")) {
    const std::string& name = seed.first;
    const auto& bytes = seed.second;
    io.put("/seed/" + name, memory_io::bytes(bytes.begin() + 1, bytes.end()));
    if ((bytes[0] & 1) != 0)
      continue;
    INFO("seed ", name);
    auto m = read_manifest_file(io, "/seed/" + name, *pool);
    CHECK_MESSAGE(m, (m ? std::string() : describe(m.error())));
    ++manifests;
  }
  CHECK(snapshots >= 2);
  CHECK(manifests >= 2);
}

TEST_CASE("a msg whose length claims more bytes than follow is refused before a buffer is made for it") {
  // The regression input: 5 bytes of CAF's varbyte length claiming an
  // 805 MB frame, and nothing after them.
  auto input = read_bytes(fuzz_dir / "regressions/fuzz_caf_deserialize/frame-length-of-805-MB-with-no-bytes-after-it");
  REQUIRE(input.size() > 1);
  msg<schema::DirectoryUpdate> m;
  caf::binary_deserializer source{nullptr, reinterpret_cast<const char*>(input.data()) + 1, input.size() - 1};
  auto err = source(m);
  REQUIRE(err);
  CHECK(is(err, errc::malformed_message));
  CHECK(describe(err).find("but only 0 bytes follow") != std::string::npos);
  CHECK(m.empty());
}
