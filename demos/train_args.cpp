#include "train_args.hpp"

#include <set>

#include <unistd.h>

#include "messages/errors.hpp"
#include "storage/error_context.hpp"
#include "storage/file_io.hpp"
#include "storage/regular_file.hpp"

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

bool recorded_train_flag(const std::string& flag) {
  // An allow-list: a flag added to keel train later is not recorded until
  // someone decides it decides the run.
  static const std::set<std::string> recorded = {
    "--model", "--shards", "--workers", "--worker-changes", "--consistency", "--optimizer", "--rules", "--lr",
    "--batch", "--combine", "--epochs", "--steps", "--seed", "--table-capacity", "--table-eviction",
    "--admit-after", "--checkpoint-every", "--checkpoint-full-every", "--checkpoint-delta-fraction",
    "--checkpoint-stream-mb", "--replay-log-mb", "--storage-deadline-s", "--kill", "--faults", "--random-faults",
    "--fault-rate", "--fault-mix", "--request-timeout", "--stall-timeout-ms", "--data-dir", "--train-limit", "--test-limit", "--scorers",
    "--timeout", "--quiet", "--verbose"};
  return recorded.count(flag) != 0;
}

caf::error save_train_args(const std::filesystem::path& dir, const std::vector<std::string>& args) {
  std::string text;
  for (auto& g : groups(args))
    if (recorded_train_flag(flag_of(g.front())))
      for (auto& a : g) text += a + "\n";
  auto io = posix_io();
  auto path = dir / train_args_file;
  // A name of this process's own, created (O_EXCL: never through a link or
  // into another file), then renamed over the old file (which replaces a
  // link itself, never what it points to).
  auto tmp = dir / (std::string(train_args_file) + ".tmp-" + std::to_string(::getpid()));
  io->remove(tmp);  // left by a crashed run of this pid, if any
  auto context = [&](const caf::error& err) { return in_context(err, "cannot record " + path.string() + ": "); };
  auto f = io->create(tmp);
  if (!f)
    return context(f.error());
  auto err = (*f)->write_at(0, text.data(), text.size());
  if (!err)
    err = (*f)->sync();
  f->reset();
  if (!err)
    err = io->rename(tmp, path);
  if (err) {
    io->remove(tmp);
    return context(err);
  }
  return context(io->sync_dir(dir));
}

caf::expected<std::vector<std::string>> load_train_args(const std::filesystem::path& dir) {
  auto path = dir / train_args_file;
  auto text = read_regular_file(path, max_train_args_bytes, symlinks::refuse);
  if (!text && is(text.error(), errc::not_found))
    return make_error(errc::not_found, "cannot resume: " + path.string() + " is missing (was " + dir.string() +
                                         " written by keel train?)");
  if (!text)
    return in_context(text.error(), "cannot resume: ");
  std::vector<std::string> args;
  for (size_t at = 0; at < text->size();) {
    auto end = text->find('\n', at);
    if (end == std::string::npos)
      end = text->size();
    if (end > at)
      args.push_back(text->substr(at, end - at));
    at = end + 1;
  }
  for (auto& g : groups(args)) {
    auto flag = flag_of(g.front());
    if (flag.empty())
      return make_error(errc::invalid_argument, "cannot resume: " + path.string() + " starts with '" + g.front() +
                                                  "', not a flag");
    if (!recorded_train_flag(flag))
      return make_error(errc::invalid_argument,
                        "cannot resume: " + path.string() + " records " + flag +
                          ", which a checkpoint directory may not choose (output files, addresses and ports come "
                          "from the command line): remove its line and give it on the command line if you want it");
  }
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
