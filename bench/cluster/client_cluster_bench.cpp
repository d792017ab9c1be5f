// Issue 23's figure across processes: an application's own loop in a
// client process of a keel cluster (keel::cluster_client, `keel cluster
// --application-loop`) beside keel's own workers on the same cluster, same
// model and configuration. `keel cluster --nodes 2` starts the coordinator
// and two node processes for the shards; the client loops run in this
// process, computing exactly what a keel worker computes
// (tests/actors/model_loop.hpp), so both runs are BSP with the same seed and
// their parameters must be bit-identical (checked: a mismatch fails the
// bench). keel's own workers run on the nodes; the clients' workers run
// here, their pushes and pulls on the data plane. The figure is the
// coordinator's samples/s over the run, from its report. Alternating runs,
// `repeats` of each; medians.
// Usage: client_cluster_bench [model=mnist-mlp] [epochs=1] [repeats=3]
//   (MNIST needs `bash scripts/fetch-mnist.sh` first; KEEL_BINARY overrides the keel program)
#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "actors/keel.hpp"
#include "bench/bench_common.hpp"
#include "tests/actors/model_loop.hpp"

using namespace keel;

namespace {

const char* program = "client_cluster_bench";

// A keel cluster run: its standard output gathered on a thread of its own.
class coordinator {
 public:
  explicit coordinator(const std::string& command) : pipe_(::popen((command + " 2>/dev/null").c_str(), "r")) {
    if (!pipe_)
      bench::fail(program, "keel cluster", make_error(errc::io_error, "cannot run " + command));
    reader_ = std::thread([this] {
      char line[4096];
      while (std::fgets(line, sizeof line, pipe_)) {
        std::lock_guard<std::mutex> guard(m_);
        out_ += line;
        changed_.notify_all();
      }
      std::lock_guard<std::mutex> guard(m_);
      ended_ = true;
      changed_.notify_all();
    });
  }
  ~coordinator() { finish(); }

  // The first match of `pattern`'s group 1 in the output, waiting for it.
  std::string await(const std::string& pattern) {
    std::regex re(pattern);
    std::unique_lock<std::mutex> lock(m_);
    std::smatch m;
    changed_.wait_for(lock, std::chrono::minutes(5), [&] { return std::regex_search(out_, m, re) || ended_; });
    if (!std::regex_search(out_, m, re))
      bench::fail(program, "keel cluster", make_error(errc::not_found, "no '" + pattern + "' in its output:\n" + out_));
    return m[1];
  }

  int finish() {
    if (reader_.joinable())
      reader_.join();
    if (pipe_) {
      status_ = ::pclose(pipe_);
      pipe_ = nullptr;
    }
    return status_;
  }

 private:
  FILE* pipe_;
  std::thread reader_;
  std::mutex m_;
  std::condition_variable changed_;
  std::string out_;
  bool ended_ = false;
  int status_ = -1;
};

struct outcome {
  double samples_per_second = 0;
  std::string sha;
};

outcome report(coordinator& c) {
  outcome o;
  o.samples_per_second = std::stod(c.await(R"(done in [0-9.]+ s, ([0-9.]+) samples/s)"));
  o.sha = c.await(R"(params_sha256 ([0-9a-f]+))");
  if (c.finish() != 0)
    bench::fail(program, "keel cluster", make_error(errc::io_error, "it failed"));
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  std::string name = argc > 1 ? argv[1] : "mnist-mlp";
  uint64_t epochs = argc > 2 ? std::stoull(argv[2]) : 1;
  int repeats = argc > 3 ? std::stoi(argv[3]) : 3;
  std::string keel_binary = std::getenv("KEEL_BINARY") ? std::getenv("KEEL_BINARY") : KEEL_BINARY;
  model_options o;
  o.data_dir = default_data_dir();
  auto m = make_model(name, o);
  if (!m)
    bench::fail(program, "model", m.error());
  job_config cfg;  // what the client loops compute with: keel train's settings below
  cfg.training_model = *m;
  cfg.training.workers = 2;
  cfg.training.shards = 2;
  cfg.training.batch_size = 32;
  cfg.training.steps = epochs * steps_per_epoch((*m)->num_train_examples(), 2, 32);
  auto dir = std::filesystem::temp_directory_path() / ("keel-client-cluster-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto secret_file = dir / "secret";
  {
    int fd = ::open(secret_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::string text = "client-cluster-bench-secret-" + std::to_string(::getpid()) + "-0123456789abcdef\n";
    if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
      bench::fail(program, "secret", make_error(errc::io_error, "cannot write " + secret_file.string()));
    ::close(fd);
  }
  auto secret = cluster_secret::from_file(secret_file);
  if (!secret)
    bench::fail(program, "secret", secret.error());
  std::string flags = " cluster --nodes 2 --quiet --model " + name + " --workers 2 --shards 2 --batch 32 --lr 0.1 --steps " +
                      std::to_string(cfg.training.steps) + " --checkpoint-every 50 --secret-file " +
                      secret_file.string() + " --checkpoint-dir ";
  std::vector<double> own, clients;
  for (int i = 0; i < repeats; ++i) {
    std::filesystem::remove_all(dir / "own");
    std::filesystem::remove_all(dir / "app");
    coordinator ours(keel_binary + flags + (dir / "own").string());
    auto a = report(ours);
    coordinator theirs(keel_binary + flags + (dir / "app").string() + " --application-loop");
    auto join = theirs.await(R"(join node:0 at 127\.0\.0\.1:([0-9]+) with)");
    cluster_client_config cc;
    cc.join = {"127.0.0.1", static_cast<uint16_t>(std::stoul(join)), {}};
    cc.secret = *secret;
    cc.workers = {0, 1};
    cc.log = [](const std::string&) {};
    auto cluster = cluster_client::connect(cc);
    if (!cluster)
      bench::fail(program, "client", cluster.error());
    std::vector<test::loop_outcome> loops(2);
    std::vector<std::thread> threads;
    for (uint32_t w = 0; w < 2; ++w)
      threads.emplace_back([&, w] {
        auto c = (*cluster)->client(w, std::chrono::minutes(2));
        if (!c)
          loops[w].error = c.error();
        else
          loops[w] = test::run_loop(*c, cfg);
      });
    for (auto& t : threads) t.join();
    for (auto& l : loops)
      if (l.error)
        bench::fail(program, "client loop", l.error);
    if (auto err = (*cluster)->wait_released(std::chrono::minutes(2)))
      bench::fail(program, "client", err);
    cluster->reset();
    auto b = report(theirs);
    if (a.sha != b.sha) {
      std::fprintf(stderr, "%s: the client run's parameters differ from keel's own workers' (BSP, same seed)\n",
                   program);
      return 1;
    }
    own.push_back(a.samples_per_second);
    clients.push_back(b.samples_per_second);
    std::printf("%s: run %d: keel's workers on the nodes %.0f samples/s; client loops in this process %.0f (%.2f); "
                "parameters bit-identical\n",
                program, i + 1, own.back(), clients.back(), clients.back() / own.back());
  }
  std::filesystem::remove_all(dir);
  auto a = bench::median(own), b = bench::median(clients);
  std::printf("%s: %s, %llu epoch(s), keel cluster --nodes 2, 2 shards x 2 workers of batch 32, BSP, checkpoints "
              "every 50 steps, median of %d: ceiling keel's own workers %.0f samples/s; client loops %.0f (ratio %.2f)\n",
              program, name.c_str(), static_cast<unsigned long long>(epochs), repeats, a, b, b / a);
  return 0;
}
