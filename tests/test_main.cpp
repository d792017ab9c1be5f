// doctest's main, compiled once and shared by every test program, with one
// guard: a run that executes no test case fails. CTest runs each test case
// as `PROGRAM --test-case=NAME`, and doctest exits 0 when NAME matches
// nothing, so a test whose name CTest's discovery mangled (it splits names
// at ';') or that was renamed after discovery would pass while running
// nothing. Listing and other queries are not runs and are left alone.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

// Set at the end of a run (queries such as --list-test-cases do not reach it).
bool g_ran = false;
unsigned g_matched = 0;

struct matched_count_listener : doctest::IReporter {
  explicit matched_count_listener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    g_ran = true;
    g_matched = stats.numTestCasesPassingFilters;
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("keel_matched_count", 1, matched_count_listener);

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  int status = context.run();
  if (context.shouldExit() || !g_ran)
    return status;
  if (g_matched == 0) {
    std::fprintf(stderr,
                 "keel tests: no test case matched this run's filters, so nothing was tested "
                 "(a test name with ';' is split by CTest's discovery; is the name right?)\n");
    return status == 0 ? 1 : status;
  }
  return status;
}
