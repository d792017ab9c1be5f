#include "actors/core/worker_schedule.hpp"

#include <algorithm>
#include <map>

#include "messages/errors.hpp"

namespace keel {

namespace {

caf::error bad_item(const std::string& item, const std::string& why) {
  return make_error(errc::invalid_argument, "worker change '" + item + "': " + why);
}

// A pass's own permutation seed: the static pass (from step 0) keeps the
// job's seed, so a schedule without changes deals the batches of before.
uint64_t pass_seed(uint64_t seed, uint64_t pass_start) {
  if (pass_start == 0)
    return seed;
  uint64_t z = seed ^ (pass_start * 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

caf::expected<worker_schedule> worker_schedule::make(std::vector<worker_span> spans, uint64_t total_steps) {
  if (spans.empty())
    return make_error(errc::invalid_argument, "a worker schedule needs at least one worker");
  for (size_t w = 0; w < spans.size(); ++w)
    if (spans[w].begin >= spans[w].end)
      return make_error(errc::invalid_argument, "worker " + std::to_string(w) + " would run no step (joins at " +
                                                  std::to_string(spans[w].begin) + ", leaves at " +
                                                  std::to_string(spans[w].end) + ")");
  worker_schedule s(static_cast<uint32_t>(spans.size()));
  s.spans_ = std::move(spans);
  if (std::all_of(s.spans_.begin(), s.spans_.end(),
                  [](const worker_span& x) { return x.begin == 0 && x.end == UINT64_MAX; }))
    s.spans_.clear();
  // The active set changes only at boundaries: each range between them has
  // one count, so checking each boundary (and step 0) checks every step.
  auto steps = s.changes();
  steps.insert(steps.begin(), 0);
  for (auto k : steps)
    if (k < total_steps && s.count(k) == 0)
      return make_error(errc::invalid_argument, "no worker is active at step " + std::to_string(k));
  return s;
}

caf::expected<worker_schedule> worker_schedule::parse(const std::string& text, uint32_t slots, uint64_t total_steps) {
  std::vector<worker_span> spans(slots);
  std::vector<bool> joined(slots), left(slots);
  size_t at = 0;
  while (at <= text.size() && !text.empty()) {
    auto comma = text.find(',', at);
    auto item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item.rfind("reserve:worker:", 0) == 0) {
      auto w_text = item.substr(15);
      if (w_text.empty() || w_text.size() > 9 || !std::all_of(w_text.begin(), w_text.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return bad_item(item, "expected reserve:worker:W");
      auto w = std::stoull(w_text);
      if (w >= slots)
        return bad_item(item, "the job has workers 0 to " + std::to_string(slots - 1));
      if (joined[w])
        return bad_item(item, "worker " + w_text + " joins once at most");
      joined[w] = true;
      spans[w].begin = reserve_step;
      continue;
    }
    bool join = item.rfind("join:worker:", 0) == 0;
    if (!join && item.rfind("leave:worker:", 0) != 0)
      return bad_item(item, "expected join:worker:W@STEP, leave:worker:W@STEP or reserve:worker:W");
    auto rest = item.substr(join ? 12 : 13);
    auto amp = rest.find('@');
    if (amp == std::string::npos || amp == 0 || amp + 1 == rest.size())
      return bad_item(item, "expected join:worker:W@STEP or leave:worker:W@STEP");
    auto digits = [](const std::string& d) {
      return !d.empty() && d.size() <= 18 && std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    auto w_text = rest.substr(0, amp), s_text = rest.substr(amp + 1);
    if (!digits(w_text) || !digits(s_text))
      return bad_item(item, "the worker and the step are whole numbers");
    auto w = std::stoull(w_text);
    auto step = std::stoull(s_text);
    if (w >= slots)
      return bad_item(item, "the job has workers 0 to " + std::to_string(slots - 1));
    if (step == 0 || step >= total_steps)
      return bad_item(item, "the step must be between 1 and " + std::to_string(total_steps - 1) +
                              " (the run has " + std::to_string(total_steps) + " steps)");
    if (join ? joined[w] : left[w])
      return bad_item(item, "worker " + w_text + " " + (join ? "joins" : "leaves") + " once at most");
    (join ? joined : left)[w] = true;
    (join ? spans[w].begin : spans[w].end) = step;
  }
  return make(std::move(spans), total_steps);
}

caf::expected<worker_schedule> worker_schedule::changed(const std::string& items, uint64_t at,
                                                         uint64_t total_steps) const {
  std::vector<worker_span> spans = spans_;
  if (spans.empty())
    spans.assign(slots_, worker_span{});
  size_t from = 0;
  while (from <= items.size()) {
    auto comma = items.find(',', from);
    auto item = items.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    from = comma == std::string::npos ? items.size() + 1 : comma + 1;
    bool join = item.rfind("join:worker:", 0) == 0;
    if (!join && item.rfind("leave:worker:", 0) != 0)
      return bad_item(item, "expected join:worker:W or leave:worker:W");
    auto w_text = item.substr(join ? 12 : 13);
    if (w_text.empty() || w_text.size() > 9 ||
        !std::all_of(w_text.begin(), w_text.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return bad_item(item, "expected join:worker:W or leave:worker:W");
    auto w = std::stoull(w_text);
    if (w >= slots_)
      return bad_item(item, "the job has workers 0 to " + std::to_string(slots_ - 1));
    auto& span = spans[w];
    if (join) {
      if (span.begin != reserve_step)
        return bad_item(item, "worker " + w_text + " is not held in reserve (reserve:worker:" + w_text +
                                " lets a worker join at runtime)");
      span.begin = at;
    } else {
      if (span.end <= at)
        return bad_item(item, "worker " + w_text + " has left already (its last step is " +
                                std::to_string(span.end - 1) + ")");
      if (span.begin >= at)
        return bad_item(item, "worker " + w_text + " has not joined by step " + std::to_string(at));
      span.end = at;
    }
  }
  auto out = make(std::move(spans), total_steps);
  if (!out)
    return make_error(errc::invalid_argument, "workers '" + items + "' from step " + std::to_string(at) + ": " +
                                                describe(out.error()));
  return out;
}

caf::error worker_schedule::check(uint32_t slots) const {
  if (slots_ != slots || (!spans_.empty() && spans_.size() != slots_))
    return make_error(errc::invalid_field, "a worker schedule of " + std::to_string(slots_) + " workers (" +
                                             std::to_string(spans_.size()) + " spans) for a job of " +
                                             std::to_string(slots));
  for (size_t w = 0; w < spans_.size(); ++w)
    if (spans_[w].begin >= spans_[w].end)
      return make_error(errc::invalid_field, "worker " + std::to_string(w) + "'s span is empty");
  return {};
}

bool worker_schedule::active(uint32_t worker, uint64_t step) const {
  auto s = span(worker);
  return worker < slots_ && s.begin <= step && step < s.end;
}

uint32_t worker_schedule::count(uint64_t step) const {
  if (spans_.empty())
    return slots_;
  uint32_t n = 0;
  for (auto& s : spans_) n += s.begin <= step && step < s.end;
  return n;
}

uint64_t worker_schedule::worker_steps(uint64_t total) const {
  if (spans_.empty())
    return uint64_t{slots_} * total;
  uint64_t n = 0;
  for (auto& s : spans_) n += std::min(s.end, total) - std::min(s.begin, total);
  return n;
}

std::vector<uint64_t> worker_schedule::changes() const {
  std::vector<uint64_t> out;
  for (auto& s : spans_) {
    if (s.begin != 0)
      out.push_back(s.begin);
    if (s.end != UINT64_MAX)
      out.push_back(s.end);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string worker_schedule::to_string() const {
  std::map<uint64_t, std::vector<std::string>> by_step;
  for (uint32_t w = 0; w < spans_.size(); ++w) {
    if (spans_[w].begin == reserve_step)
      by_step[spans_[w].begin].push_back("reserve:worker:" + std::to_string(w));
    else if (spans_[w].begin != 0)
      by_step[spans_[w].begin].push_back("join:worker:" + std::to_string(w) + "@" + std::to_string(spans_[w].begin));
    if (spans_[w].end != UINT64_MAX)
      by_step[spans_[w].end].push_back("leave:worker:" + std::to_string(w) + "@" + std::to_string(spans_[w].end));
  }
  std::string out;
  for (auto& [step, items] : by_step)
    for (auto& i : items) out += (out.empty() ? "" : ",") + i;
  return out;
}

batch_position worker_schedule::batch_at(uint64_t seed, uint32_t worker, uint64_t step, uint32_t batch_size,
                                         uint64_t num_examples) const {
  uint64_t start = 0;
  for (auto k : changes())
    if (k <= step)
      start = k;
  uint32_t n = count(step), rank = 0;
  for (uint32_t w = 0; w < worker; ++w) rank += active(w, step);
  auto spe = std::max<uint64_t>(1, steps_per_epoch(num_examples, n, batch_size));
  auto es = split_global_step(step - start, spe);
  return batch_position{pass_seed(seed, start), es.epoch, es.step, rank, n, batch_size};
}

}  // namespace keel
