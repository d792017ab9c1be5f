#pragma once
// Which of CI's two suites a test case runs in. CI runs every test on a
// Release build, then the sanitizer suite on the ASan+UBSan build (about six
// times slower). The sanitizer suite is every in-process test and a few of
// each multi-process kind (a node killed, joined, drained, a coordinator
// resumed, peer copies, elastic workers). A test case declared with
// KEEL_RELEASE_TEST_CASE is left out of it: the long seeded tiers and the
// multi-process runs that walk, over more seeds and models, code the kept
// tests already walk; what they add is schedules, which the Release suite
// covers, not memory use, which is what the sanitizers look at.
// `cmake -DKEEL_SANITIZE=ON -DKEEL_SANITIZE_ALL_TESTS=ON` puts them back.
//
// Left out, the case still compiles (its body becomes an unregistered
// function), so the sanitizer build keeps it building.
#include <doctest/doctest.h>

#ifdef KEEL_SANITIZER_SUITE
#define KEEL_RELEASE_TEST_CASE(name) [[maybe_unused]] static void DOCTEST_ANONYMOUS(keel_release_only_)()
#else
#define KEEL_RELEASE_TEST_CASE(name) TEST_CASE(name)
#endif
