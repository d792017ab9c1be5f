#pragma once
// Strict flag handling shared by every `keel` subcommand, on top of
// Boost.ProgramOptions. parse_flags accepts only the flags a command declares
// (no abbreviations, no repeats, no stray arguments) and turns any problem
// into ONE line on stderr naming the flag and what is wrong, e.g.
//   keel train: --shards: 'x' is not a number (see keel train --help)
// with exit status 2. Numbers are read strictly by number_flag: the whole
// text, in range, never a negative wrapped into an unsigned. print_help lists
// every flag with its default or says it has none. Nothing here is global:
// each command builds its own options_description.

#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include <boost/program_options.hpp>
#include <caf/error.hpp>

#include "actors/job/config_bounds.hpp"
#include "commands.hpp"

namespace keel::cli {

namespace po = boost::program_options;

// Why a text is not a valid number for a flag, or nullopt if `out` now holds
// it. `text` must be all of the value: "12", not "12x" nor " 12".
std::optional<std::string> parse_number(const std::string& text, uint64_t min, uint64_t max,
                                        uint64_t& out);
std::optional<std::string> parse_number(const std::string& text, double min, double max,
                                        double& out);
// "N" (low = high = N) or "LOW:HIGH", each in [min, max] and low <= high:
// why not, or nullopt.
std::optional<std::string> parse_number_range(const std::string& text, uint64_t min, uint64_t max, uint64_t& low,
                                              uint64_t& high);

// A Boost.ProgramOptions value that stores a number in [min, max] into
// `*target`, read strictly (see parse_number); `name` is how the help shows
// the value ("N", "MS"). The target's current value is its default.
template <class T>
class number_value : public po::typed_value<T> {
 public:
  number_value(T* target, T min, T max) : po::typed_value<T>(target), min_(min), max_(max) {}

  void xparse(boost::any& store, const std::vector<std::string>& tokens) const override {
    if (!store.empty())
      throw po::multiple_occurrences();
    const std::string& text = tokens.empty() ? std::string() : tokens.front();
    using wide = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;
    wide v{};
    if (auto why = parse_number(text, static_cast<wide>(min_), static_cast<wide>(max_), v)) {
      po::error_with_option_name e(*why);
      throw e;
    }
    store = static_cast<T>(v);
  }

 private:
  T min_;
  T max_;
};

// A number flag stored in `*target`, in [min, max], shown as `name` with the
// target's current value as its default (or with no default if `defaulted`
// is false: the flag then only counts when given, see variables_map::count).
template <class T>
number_value<T>* number_flag(T* target, const char* name, T min = std::numeric_limits<T>::lowest(),
                             T max = std::numeric_limits<T>::max(), bool defaulted = true) {
  static_assert(std::is_unsigned_v<T> || std::is_floating_point_v<T>, "unsigned or floating point");
  auto* v = new number_value<T>(target, min, max);  // owned by the options_description
  v->value_name(name);
  if (defaulted)
    v->default_value(*target);
  return v;
}

// A number flag of a job's configuration, in its bound (config_bounds.hpp):
// the flag refuses what job::start would.
template <class T>
number_value<T>* number_flag(T* target, const char* name, bound<T> b, bool defaulted = true) {
  return number_flag(target, name, b.min, b.max, defaulted);
}

// A text flag stored in `*target`, shown as `name`, with the target's
// current value as its default if `defaulted`.
po::typed_value<std::string>* text_flag(std::string* target, const char* name, bool defaulted = true);

// What a command's flags are and how to say it went wrong.
struct command_flags {
  std::string command;                  // "train": messages say "keel train: ..."
  po::options_description visible;      // listed by --help
  po::options_description hidden;       // positional arguments, not listed
  po::positional_options_description positional;
};

// Parses `a` into `vm`. On any problem prints one line on stderr and returns
// 2; returns nullopt when `vm` holds the flags (notifiers have run).
std::optional<int> parse_flags(const command_flags& flags, const args& a, po::variables_map& vm);

// Prints one line "keel COMMAND: FLAG: WHAT (see keel COMMAND --help)" on
// stderr and returns 2, the exit status of bad usage. `flag` may be empty.
int usage_error(const std::string& command, const std::string& flag, const std::string& what);

// The text of a keel error without its code ("consistency 'x' is not ..."),
// or describe(e) for any other error.
std::string error_text(const caf::error& e);

// Prints `usage` and `about`, then every visible flag on its own line with
// its value's name, its description and "(default: X)", "(no default)" or
// "(a switch: off unless given)".
void print_help(std::ostream& out, const std::string& usage, const std::string& about,
                const po::options_description& flags);

}  // namespace keel::cli
