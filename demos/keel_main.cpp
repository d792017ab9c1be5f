// `keel`: the command-line program. `keel COMMAND [ARGS...]`; `keel --help`
// lists the commands, `keel COMMAND --help` (or `keel help COMMAND`)
// describes one. An unknown command is one line on stderr and exit 2.
#include <iostream>
#include <string>

#include "cli_flags.hpp"
#include "commands.hpp"

namespace {

struct command {
  const char* name;
  const char* summary;
  int (*run)(const keel::cli::args&);
};

const command commands[] = {
  {"train", "train a model on keel's parameter server in this process", keel::cli::train},
  {"chaos", "run seeded random fault plans and check keel's invariants", keel::cli::chaos},
  {"inspect", "list and verify the checkpoints in a directory", keel::cli::inspect},
  {"plot", "draw a run's report (keel train --report) as SVG", keel::cli::plot},
  {"node", "run this process as a cluster node (serves a coordinator)", keel::cli::node},
  {"cluster", "train across keel node processes (started here, or running anywhere with --connect)",
   keel::cli::cluster},
  {"admin", "ask a running keel cluster (--admin-port) for its status, drains, moves and joins",
   keel::cli::admin},
};

void usage(std::ostream& out) {
  out << "usage: keel COMMAND [FLAGS...]\n\ncommands:\n";
  for (auto& c : commands)
    out << "  " << c.name << std::string(12 - std::string(c.name).size(), ' ') << c.summary << "\n";
  out << "\nflags:\n  --help      show this help (a switch: off unless given)\n"
      << "\n`keel COMMAND --help` lists a command's flags with their defaults.\n"
      << "Exit status: 0 success, 1 the work failed, 2 bad usage (one line on stderr).\n";
}

const command* find(const std::string& name) {
  for (auto& c : commands)
    if (name == c.name)
      return &c;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(std::cerr);
    return 2;
  }
  std::string name = argv[1];
  if (name == "help" || name == "--help" || name == "-h") {
    if (argc > 2) {  // keel help COMMAND
      auto* c = find(argv[2]);
      if (c == nullptr)
        return keel::cli::usage_error("", "", std::string("unknown command '") + argv[2] + "'");
      return c->run({"--help"});
    }
    usage(std::cout);
    return 0;
  }
  if (auto* c = find(name))
    return c->run(keel::cli::args(argv + 2, argv + argc));
  if (name.rfind("-", 0) == 0)
    return keel::cli::usage_error("", name, "unknown flag (commands come first: keel COMMAND --FLAG)");
  return keel::cli::usage_error("", "", "unknown command '" + name + "'");
}
