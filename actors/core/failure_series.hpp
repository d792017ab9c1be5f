#pragma once
// A failure_series summarises repeated identical failures (checkpoints
// failing on a full disk, many a second) so that a timeline and a terminal
// show a few lines, not one per failure: the first failure as it is, a
// summary at the 10th, 100th, 1000th, ... ("checkpoint failed 10 times since
// 12.3 s: TEXT"), and, when a success ends the series, its total count.
// Failures are identical when their texts are equal once every word that
// holds a digit is folded (checkpoint ids, steps and file names with their
// hex tags differ from one failure to the next; the cause does not). A failure of another text ends
// the series before it and starts its own. A plain value, not thread-safe.

#include <cstdint>
#include <string>
#include <vector>

namespace keel {

class failure_series {
 public:
  // What to show for a failure or a success.
  struct line {
    std::string text;
    uint64_t count = 0;  // failures in the series so far (the total, when it ended)
  };

  // A failure described by `text`, `at_ms` after the run began: the lines
  // to show (none while a series repeats between its summaries).
  std::vector<line> failed(const std::string& text, int64_t at_ms);
  // A success (`how`, e.g. "checkpoint 7 committed") ends the series: its
  // total, when it held more than one failure.
  std::vector<line> ended(const std::string& how, int64_t at_ms);

  bool active() const { return count_ > 0; }
  uint64_t count() const { return count_; }
  const std::string& last_text() const { return last_text_; }

  // `text` with every word (a run of letters and digits) that holds a digit
  // folded to '#': equal keys, one series.
  static std::string key_of(const std::string& text);

 private:
  std::string key_;
  std::string last_text_;
  uint64_t count_ = 0;
  int64_t since_ms_ = 0;
  uint64_t next_summary_ = 10;
};

}  // namespace keel
