#include "cli_flags.hpp"

#include <charconv>
#include <cmath>
#include <iostream>
#include <sstream>

#include <caf/message.hpp>

#include "messages/errors.hpp"

namespace keel::cli {

namespace {

// The hidden name that collects arguments a command does not take, so the
// error can name the first of them (Boost's own error does not).
constexpr const char* extra_arguments = "keel-unexpected-arguments";

template <class T>
std::string number_text(T v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// "'x' is not a number", "'1.5' is not a whole number", "'-1' is negative".
std::string not_a_whole_number(const std::string& text) {
  double d = 0;
  auto end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, d);
  if (ec != std::errc() || p != end || !std::isfinite(d))
    return "'" + text + "' is not a number";
  if (d < 0)
    return "'" + text + "' is negative";
  return "'" + text + "' is not a whole number";
}

template <class T>
std::optional<std::string> in_range(const std::string& text, T v, T min, T max) {
  if (v < min)
    return "'" + text + "' is too small (at least " + number_text(min) + ")";
  if (v > max)
    return "'" + text + "' is too large (at most " + number_text(max) + ")";
  return std::nullopt;
}

// A text value that is not another flag: `--report --plot x` would otherwise
// write the report to a file named "--plot".
class text_value : public po::typed_value<std::string> {
 public:
  using po::typed_value<std::string>::typed_value;

  void xparse(boost::any& store, const std::vector<std::string>& tokens) const override {
    if (!store.empty())
      throw po::multiple_occurrences();
    const std::string& text = tokens.empty() ? std::string() : tokens.front();
    if (text.rfind("--", 0) == 0) {
      po::error_with_option_name e("a value is missing ('" + text + "' is a flag)");
      throw e;
    }
    store = text;
  }
};

std::string syntax_problem(const po::invalid_command_line_syntax& e) {
  switch (e.kind()) {
    case po::invalid_syntax::missing_parameter: return "a value is missing";
    case po::invalid_syntax::extra_parameter: return "takes no value";
    case po::invalid_syntax::empty_adjacent_parameter: return "a value is missing after '='";
    default: return e.what();
  }
}

// "--help" or "-h, --help", then the value's name if it takes one.
std::string flag_title(const po::option_description& o) {
  std::string name = o.format_name();  // "--shards" or "-h [ --help ]"
  std::string title = "--" + o.long_name();
  if (name.rfind("--", 0) != 0 && name.rfind("-", 0) == 0)
    title = name.substr(0, name.find(' ')) + ", " + title;
  if (o.semantic()->max_tokens() > 0) {
    std::string param = o.format_parameter();  // "N (=2)" or "N"
    title += " " + param.substr(0, param.find(" (="));
  }
  return title;
}

std::string flag_default(const po::option_description& o) {
  if (o.semantic()->max_tokens() == 0)
    return "(a switch: off unless given)";
  std::string param = o.format_parameter();
  auto at = param.find(" (=");
  if (at != std::string::npos)
    return "(default: " + param.substr(at + 3, param.size() - at - 4) + ")";
  if (o.description().find("default") != std::string::npos)
    return "";  // the description says what happens without it
  return "(no default)";
}

// `text` broken at spaces into lines of at most `columns`, the lines after
// the first indented to `indent` (the first starts there already).
std::string wrapped(const std::string& text, size_t indent, size_t columns) {
  std::string out;
  size_t col = indent, at = 0;
  while (at < text.size()) {
    size_t end = text.find(' ', at);
    if (end == std::string::npos)
      end = text.size();
    std::string word = text.substr(at, end - at);
    if (col > indent && col + 1 + word.size() > columns) {
      out += "\n" + std::string(indent, ' ');
      col = indent;
    } else if (col > indent) {
      out += ' ';
      ++col;
    }
    out += word;
    col += word.size();
    at = end + 1;
  }
  return out;
}

}  // namespace

std::optional<std::string> parse_number(const std::string& text, uint64_t min, uint64_t max,
                                        uint64_t& out) {
  uint64_t v = 0;
  auto end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range && p == end)
    return "'" + text + "' is too large (at most " + number_text(max) + ")";
  if (ec != std::errc() || p != end || text.empty())
    return not_a_whole_number(text);
  if (auto why = in_range(text, v, min, max))
    return why;
  out = v;
  return std::nullopt;
}

std::optional<std::string> parse_number_range(const std::string& text, uint64_t min, uint64_t max, uint64_t& low,
                                              uint64_t& high) {
  auto colon = text.find(':');
  if (colon == std::string::npos) {
    auto why = parse_number(text, min, max, low);
    high = low;
    return why;
  }
  if (auto why = parse_number(text.substr(0, colon), min, max, low))
    return why;
  if (auto why = parse_number(text.substr(colon + 1), min, max, high))
    return why;
  if (low > high)
    return "'" + text + "' puts the minimum above the maximum";
  return std::nullopt;
}

std::optional<std::string> parse_number(const std::string& text, double min, double max,
                                        double& out) {
  double v = 0;
  auto end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || text.empty() || !std::isfinite(v))
    return "'" + text + "' is not a number";
  if (auto why = in_range(text, v, min, max))
    return why;
  out = v;
  return std::nullopt;
}

po::typed_value<std::string>* text_flag(std::string* target, const char* name, bool defaulted) {
  auto* v = new text_value(target);  // owned by the options_description
  v->value_name(name);
  if (defaulted)
    v->default_value(*target);
  return v;
}

int usage_error(const std::string& command, const std::string& flag, const std::string& what) {
  std::string who = command.empty() ? "keel" : "keel " + command;
  std::cerr << who << ": " << (flag.empty() ? "" : flag + ": ") << what << " (see " << who
            << " --help)\n";
  return 2;
}

std::string error_text(const caf::error& e) {
  if (e && e.category() == error_category() && e.context().size() == 1 &&
      e.context().match_element<std::string>(0))
    return e.context().get_as<std::string>(0);
  return describe(e);
}

std::optional<int> parse_flags(const command_flags& flags, const args& a, po::variables_map& vm) {
  po::options_description all;
  all.add(flags.visible).add(flags.hidden);
  all.add_options()(extra_arguments, po::value<std::vector<std::string>>());
  po::positional_options_description positional = flags.positional;
  positional.add(extra_arguments, -1);
  auto style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  const auto& cmd = flags.command;
  try {
    po::store(po::command_line_parser(a).options(all).positional(positional).style(style).run(), vm);
    if (vm.count(extra_arguments))
      return usage_error(cmd, "", "unexpected argument '" +
                                    vm[extra_arguments].as<std::vector<std::string>>().front() + "'");
    po::notify(vm);
  } catch (const po::unknown_option& e) {
    return usage_error(cmd, e.get_option_name(), "unknown flag");
  } catch (const po::invalid_command_line_syntax& e) {
    return usage_error(cmd, e.get_option_name(), syntax_problem(e));
  } catch (const po::multiple_occurrences& e) {
    return usage_error(cmd, e.get_option_name(), "given more than once");
  } catch (const po::error_with_option_name& e) {
    return usage_error(cmd, e.get_option_name(), e.what());
  } catch (const po::error& e) {
    return usage_error(cmd, "", e.what());
  }
  return std::nullopt;
}

void print_help(std::ostream& out, const std::string& usage, const std::string& about,
                const po::options_description& flags) {
  out << "usage: " << usage << "\n\n" << about << "\n\nflags:\n";
  size_t width = 0;
  for (auto& o : flags.options())
    width = std::max(width, flag_title(*o).size());
  width = std::min<size_t>(width, 26);
  for (auto& o : flags.options()) {
    std::string title = flag_title(*o);
    std::string text = o->description();
    std::string dflt = flag_default(*o);
    if (!dflt.empty())
      text += " " + dflt;
    out << "  " << title;
    if (title.size() > width)
      out << "\n  " << std::string(width, ' ');
    else
      out << std::string(width - title.size(), ' ');
    out << "  " << wrapped(text, width + 4, 100) << "\n";
  }
}

}  // namespace keel::cli
