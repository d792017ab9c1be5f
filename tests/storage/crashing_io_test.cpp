// crashing_io: unarmed it only forwards; armed, the next write (and only
// that one) stores the first half of its bytes and calls the crash, which in
// keel node ends the process. Here the crash returns, so the write fails.
#include <fstream>
#include <iterator>
#include <string>

#include <doctest/doctest.h>

#include "messages/errors.hpp"
#include "storage/crashing_io.hpp"
#include "storage_fixtures.hpp"

using namespace keel;
using namespace keel::test;

namespace {

std::string contents(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("crashing_io stores half of the first write after it is armed, calls the crash, and forwards the rest") {
  temp_dir dir;
  std::vector<std::string> crashes;
  auto io = crashing_io::wrap(posix_io(), [&](const std::filesystem::path& f, uint64_t stored, uint64_t size) {
    crashes.push_back(f.filename().string() + " " + std::to_string(stored) + "/" + std::to_string(size));
  });
  auto file = io->create(dir.path() / "a.snap.tmp");
  REQUIRE(file);
  const std::string first = "0123456789", second = "abcdefgh";
  REQUIRE(!(*file)->write_at(0, first.data(), first.size()));  // unarmed: all of it
  io->arm();
  CHECK(io->armed());
  auto err = (*file)->write_at(first.size(), second.data(), second.size());
  REQUIRE(err);
  CHECK(is(err, errc::io_error));
  CHECK_MESSAGE(describe(err).find("after 4 of 8 bytes") != std::string::npos, describe(err));
  CHECK(crashes == std::vector<std::string>{"a.snap.tmp 4/8"});
  CHECK(!io->armed());
  CHECK(contents(dir.path() / "a.snap.tmp") == "0123456789abcd");
  // Armed once, it crashed once: the next write is whole again.
  REQUIRE(!(*file)->write_at(14, "XY", 2));
  CHECK(crashes.size() == 1);
  CHECK(contents(dir.path() / "a.snap.tmp") == "0123456789abcdXY");
}
