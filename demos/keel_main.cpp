// `keel`: the command-line program. `keel COMMAND [ARGS...]`; `keel help`
// lists the commands, `keel COMMAND --help` describes one.
#include <iostream>
#include <string>

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
  {"cluster", "train across N keel node processes on this machine, killing nodes as a plan says", keel::cli::cluster},
  {"inspect", "list and verify the checkpoints in a directory", keel::cli::inspect},
  {"node", "run this process as a cluster node (serves a coordinator)", keel::cli::node},
};

void usage(std::ostream& out) {
  out << "usage: keel COMMAND [ARGS...]\n\ncommands:\n";
  for (auto& c : commands)
    out << "  " << c.name << std::string(12 - std::string(c.name).size(), ' ') << c.summary << "\n";
  out << "\n`keel COMMAND --help` describes a command.\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(std::cerr);
    return 2;
  }
  std::string name = argv[1];
  if (name == "help" || name == "--help" || name == "-h") {
    usage(std::cout);
    return 0;
  }
  for (auto& c : commands)
    if (name == c.name)
      return c.run(keel::cli::args(argv + 2, argv + argc));
  std::cerr << "keel: unknown command '" << name << "'\n\n";
  usage(std::cerr);
  return 2;
}
