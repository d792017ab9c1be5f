// A checkpoint directory has one writer at a time: directory_lock is an
// exclusive flock the kernel drops with its holder, and a second taker is
// refused with the holder's pid and host.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include <doctest/doctest.h>

#include "storage/directory_lock.hpp"
#include "storage_fixtures.hpp"

using namespace keel;
using namespace keel::test;

TEST_CASE("a second lock on a checkpoint directory is refused, naming the holder's pid and host") {
  temp_dir dir;
  auto first = directory_lock::acquire(dir.path());
  REQUIRE_MESSAGE(first, describe(first.error()));
  CHECK(first->held());
  // flock belongs to an open file: a second open in the same process conflicts too.
  auto second = directory_lock::acquire(dir.path());
  REQUIRE(!second);
  auto text = describe(second.error());
  CHECK_MESSAGE(text.find("in use by pid " + std::to_string(::getpid()) + " on host ") != std::string::npos,
                text);
  CHECK(text.find(dir.path().string()) != std::string::npos);
  first->release();
  auto third = directory_lock::acquire(dir.path());
  CHECK_MESSAGE(third, describe(third.error()));
}

TEST_CASE("the kernel releases a directory lock when its holder is killed with SIGKILL") {
  temp_dir dir;
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto lock = directory_lock::acquire(dir.path());
    char c = lock ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    for (;;) ::pause();  // holds the lock until killed
  }
  ::close(ready[1]);
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  ::close(ready[0]);
  REQUIRE(c == 'y');
  auto while_alive = directory_lock::acquire(dir.path());
  REQUIRE(!while_alive);
  CHECK(describe(while_alive.error()).find("pid " + std::to_string(child)) != std::string::npos);
  ::kill(child, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  auto after = directory_lock::acquire(dir.path());
  CHECK_MESSAGE(after, describe(after.error()));
}

TEST_CASE("a directory lock is refused for a directory that does not exist, naming it") {
  temp_dir dir;
  auto missing = directory_lock::acquire(dir.path() / "nope");
  REQUIRE(!missing);
  CHECK(describe(missing.error()).find("nope") != std::string::npos);
}
