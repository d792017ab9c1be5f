// `keel inspect DIR [--verify]`: lists the checkpoints of a snapshot store
// with step, shards, tensors, shapes, sizes and validity; each shard's file
// is a base or a delta, and a delta's chain (base checkpoint, files, bytes)
// is listed and checked with it. Without --verify
// it checks headers, lengths and schemas; with --verify every CRC32C too.
// Exit status: 0 when everything is valid, 1 when anything is damaged (each
// damaged file is named with its reason), 2 for bad usage or a missing DIR.
#include <ctime>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli_flags.hpp"
#include "commands.hpp"
#include "actors/core/table_delta.hpp"
#include "messages/errors.hpp"
#include "storage/checkpoint_files.hpp"
#include "storage/snapshot.hpp"
#include "storage/store_inspection.hpp"

namespace keel::cli {

namespace {

std::string human_bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream out;
  if (u == 0)
    out << n << " B";
  else
    out << std::fixed << std::setprecision(1) << v << " " << units[u];
  return out.str();
}

std::string utc_time(int64_t unix_ms) {
  if (unix_ms <= 0)
    return "-";
  std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// What the delta file `s` covers, from its tables' delta headers
// (actors/core/table_delta.hpp) and its dense chunk list: "N rows changed and
// M removed in T tables (R rows after), C dense chunks". Empty when the file
// cannot be read (the summary reports that).
std::string delta_coverage(const std::filesystem::path& dir, const snapshot_summary& s) {
  auto pool = buffer_pool::create(0, 0);
  auto snap = read_snapshot_file(*posix_io(), dir / s.file, *pool, verify_mode::structure);
  if (!snap)
    return {};
  uint64_t changed = 0, removed = 0, after = 0, tables = 0, chunks = 0;
  for (auto t : snap->root().getTensors()) {
    std::string name = t.getName().cStr();
    if (name == "dense.chunks" && t.getShape().size() == 1)
      chunks = t.getShape()[0];
    if (name.rfind("table.", 0) != 0 || t.getChunks().size() == 0)
      continue;
    // The header is in the first chunk; the counts are checked against the
    // tensor's whole length.
    auto first = t.getChunks()[0];
    if (first.size() < table_delta_header_bytes)
      return {};
    auto counts = table_delta_counts_of(first.begin(), tensor_bytes(t));
    if (!counts)
      return {};
    changed += counts->changed, removed += counts->removed, after += counts->rows_after, ++tables;
  }
  return std::to_string(changed) + " rows changed and " + std::to_string(removed) + " removed in " +
         std::to_string(tables) + " tables (" + std::to_string(after) + " rows after), " + std::to_string(chunks) +
         " dense chunk" + (chunks == 1 ? "" : "s");
}

// A base: "base". A delta: "delta on checkpoint B", then a line for its
// chain (how many files, their bytes) and one per file of it, and what it
// covers.
void print_shard(std::ostream& out, const std::filesystem::path& dir, const snapshot_summary& s) {
  out << "  shard " << s.shard << "  " << s.file << "  " << human_bytes(s.file_bytes) << "  "
      << (s.delta() ? "delta on checkpoint " + std::to_string(s.base_checkpoint) : std::string("base")) << "  step "
      << s.step << "  version " << s.shard_version << "  workers " << s.workers;
  if (s.write_us > 0)
    out << "  written in " << (s.write_us + 500) / 1000 << " ms";
  out << "\n";
  if (s.delta()) {
    out << "    chain   " << s.chain.size() + 1 << " files from the base of checkpoint " << s.base_checkpoint << ", "
        << human_bytes(s.chain_bytes()) << " in all\n";
    for (size_t i = 0; i < s.chain.size(); ++i)
      out << "      " << (i == 0 ? "base " : "delta") << "  " << s.chain[i].file << "  " << human_bytes(s.chain[i].bytes)
          << (s.chain[i].damaged ? "  DAMAGED" : "") << "\n";
    out << "      delta  " << s.file << "  (this file)\n";
    if (auto covers = delta_coverage(dir, s); !covers.empty())
      out << "    covers  " << covers << "\n";
  }
  for (auto& t : s.tensors)
    out << "    tensor  " << t.name << "  " << dtype_name(t.dtype) << " " << shape_text(t.shape)
        << "  " << human_bytes(t.bytes) << " in " << t.chunks << " chunk"
        << (t.chunks == 1 ? "" : "s") << "\n";
  for (auto& [name, bytes] : s.sections)
    out << "    section " << name << "  " << human_bytes(bytes) << "\n";
}

// Why checkpoint `c` is not of `owner` (the run of the directory's newest
// checkpoint), or "" when it is.
std::string foreign(const checkpoint_summary& c, const run_identity& owner) {
  if (owner.empty() || c.step == 0)
    return {};  // nothing to compare with, or an unreadable manifest (damage says why)
  if (c.run.empty())
    return "carries no run id (a keel from before run ids), the directory's newest checkpoint is of run " +
           owner.run_id;
  if (c.run.run_id != owner.run_id)
    return "of run " + c.run.run_id + ", but the directory's newest checkpoint is of run " + owner.run_id;
  if (c.run.config_hash != owner.config_hash)
    return "of another configuration than the directory's newest checkpoint: " +
           config_difference(c.run.config, owner.config);
  return {};
}

void print_checkpoint(std::ostream& out, const std::filesystem::path& dir, const checkpoint_summary& c,
                      const std::string& foreign_why) {
  out << "checkpoint " << c.checkpoint << "  "
      << (!c.valid() ? "DAMAGED" : foreign_why.empty() ? "VALID" : "FOREIGN") << "  step " << c.step
      << "  created " << utc_time(c.created_unix_ms) << "  shards " << c.shards.size()
      << (c.valid() ? "" : " readable") << "  (" << c.manifest_file << ")\n";
  out << "  run " << (c.run.empty() ? std::string("(none: written before run ids)") : c.run.run_id)
      << (c.run.config_hash.empty() ? "" : "  configuration " + c.run.config_hash.substr(0, 16)) << "\n";
  if (!foreign_why.empty())
    out << "  FOREIGN: " << foreign_why << "\n";
  for (auto& s : c.shards)
    print_shard(out, dir, s);
  for (auto& d : c.damage)
    out << "  DAMAGED " << d.file << ": " << describe(d.reason) << "\n";
}

}  // namespace

int inspect(const args& a) {
  std::string dir_text;
  command_flags flags{"inspect", po::options_description(), po::options_description(), {}};
  flags.visible.add_options()("help,h", "describe this command")(
    "verify", "check every CRC32C (every byte of every file), not only headers and schemas");
  flags.hidden.add_options()("dir", text_flag(&dir_text, "DIR", false), "the snapshot store's directory");
  flags.positional.add("dir", 1);
  po::variables_map vm;
  if (auto status = parse_flags(flags, a, vm))
    return *status;
  if (vm.count("help") != 0) {
    print_help(std::cout, "keel inspect DIR [--verify]",
               "Lists the checkpoints in DIR with step, shards, tensors, shapes, sizes and validity,\n"
               "and for a shard whose file is a delta its chain: base checkpoint, files and bytes.\n"
               "Exit status: 0 all valid, 1 something is damaged, 2 bad usage.",
               flags.visible);
    return 0;
  }
  if (dir_text.empty())
    return usage_error("inspect", "", "missing DIR");
  std::filesystem::path dir = dir_text;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    std::cerr << "keel inspect: " << dir.string()
              << (std::filesystem::exists(dir, ec) ? ": not a directory\n" : ": no such directory\n");
    return 2;
  }
  auto mode = vm.count("verify") != 0 ? verify_mode::checksums : verify_mode::structure;
  auto summary = inspect_store(dir, mode);
  if (!summary) {
    std::cerr << "keel inspect: " << describe(summary.error()) << "\n";
    return 2;
  }
  auto& out = std::cout;
  out << "store " << dir.string() << "  ("
      << (mode == verify_mode::checksums ? "verified: every CRC32C checked"
                                         : "headers and schemas checked; --verify checks every CRC")
      << ")\n";
  // The directory's run: that of its newest checkpoint with a readable manifest.
  run_identity owner;
  for (auto& c : summary->checkpoints)
    if (c.step > 0 || !c.run.empty()) {
      owner = c.run;
      break;
    }
  std::vector<std::string> foreign_files;
  for (auto& c : summary->checkpoints) {
    auto why = c.valid() ? foreign(c, owner) : std::string();
    print_checkpoint(out, dir, c, why);
    if (!why.empty())
      foreign_files.push_back(c.manifest_file + ": " + why);
  }
  for (auto& f : summary->leftovers)
    out << "leftover " << f << "  (uncommitted or temporary: removed when the store is next opened)\n";
  auto damaged = summary->damaged();
  out << summary->checkpoints.size() << " checkpoint" << (summary->checkpoints.size() == 1 ? "" : "s")
      << ", " << summary->checkpoints.size() - damaged - foreign_files.size() << " valid, " << damaged
      << " damaged, " << foreign_files.size() << " foreign\n";
  for (auto& f : foreign_files)
    std::cerr << "keel inspect: foreign: " << f << "\n";
  if (damaged > 0 || !foreign_files.empty()) {
    for (auto& c : summary->checkpoints)
      for (auto& d : c.damage)
        std::cerr << "keel inspect: damaged: " << describe(d.reason) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace keel::cli
