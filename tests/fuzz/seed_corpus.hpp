#pragma once
// The seed corpus: a few small, valid inputs per fuzz target, made by keel's
// own builders so they stay in step with the schemas. The files under
// tests/fuzz/corpus/<target>/ are exactly what `write_seed_corpus` writes
// (the replay test checks it); regenerate them with
//   build/tests/fuzz/keel_fuzz_corpus_generator tests/fuzz/corpus
// after a schema or format change. Deterministic: the same build writes the
// same bytes.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace keel::fuzz {

using seed_file = std::vector<unsigned char>;

// Seeds by target name, then by file name.
std::map<std::string, std::map<std::string, seed_file>> seed_corpus();

// Writes seed_corpus() as `dir/<target>/<file>`, replacing what is there.
void write_seed_corpus(const std::filesystem::path& dir);

}  // namespace keel::fuzz
