#include "train_args.hpp"

#include <fstream>
#include <map>
#include <set>

#include "messages/errors.hpp"

namespace keel::cli {

namespace {

// The flag a token names ("--steps" for "--steps=60"), or "" for a value.
std::string flag_of(const std::string& token) {
  if (token.rfind("--", 0) != 0)
    return {};
  return token.substr(0, token.find('='));
}

// Tokens grouped by flag, in order: each group is a flag and its values.
std::vector<std::vector<std::string>> groups(const std::vector<std::string>& args) {
  std::vector<std::vector<std::string>> out;
  for (auto& a : args) {
    if (!flag_of(a).empty() || out.empty())
      out.emplace_back();
    out.back().push_back(a);
  }
  return out;
}

}  // namespace

caf::error save_train_args(const std::filesystem::path& dir, const std::vector<std::string>& args) {
  auto path = dir / train_args_file;
  auto tmp = dir / (std::string(train_args_file) + ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (auto& g : groups(args)) {
      auto flag = flag_of(g.front());
      if (flag == "--resume" || flag == "--checkpoint-dir")
        continue;
      for (auto& a : g) out << a << "\n";
    }
    if (!out.flush())
      return make_error(errc::io_error, "cannot write " + tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    return make_error(errc::io_error, "cannot write " + path.string() + ": " + ec.message());
  return {};
}

caf::expected<std::vector<std::string>> load_train_args(const std::filesystem::path& dir) {
  auto path = dir / train_args_file;
  std::ifstream in(path);
  if (!in)
    return make_error(errc::not_found, "cannot resume: " + path.string() +
                                         " is missing (was " + dir.string() +
                                         " written by keel train?)");
  std::vector<std::string> args;
  for (std::string line; std::getline(in, line);)
    if (!line.empty())
      args.push_back(line);
  return args;
}

std::vector<std::string> merge_train_args(const std::vector<std::string>& recorded,
                                          const std::vector<std::string>& given) {
  std::set<std::string> replaced;
  for (auto& g : groups(given)) replaced.insert(flag_of(g.front()));
  std::vector<std::string> out;
  for (auto& g : groups(recorded))
    if (!replaced.count(flag_of(g.front())))
      out.insert(out.end(), g.begin(), g.end());
  out.insert(out.end(), given.begin(), given.end());
  return out;
}

}  // namespace keel::cli
