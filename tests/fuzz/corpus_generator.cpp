// Writes the seed corpus (seed_corpus.hpp) under the directory given, e.g.
//   keel_fuzz_corpus_generator tests/fuzz/corpus

#include <cstdio>
#include <exception>

#include "seed_corpus.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  try {
    keel::fuzz::write_seed_corpus(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
