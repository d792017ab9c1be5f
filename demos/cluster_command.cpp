// `keel cluster --nodes N [keel train flags] [--kill node:1@100]`: a demo
// cluster on this machine. It starts N `keel node` processes on 127.0.0.1
// (OS-picked ports, a fresh cluster secret), runs a training job whose
// shards and workers live on them (this process is the coordinator: root,
// the directory and the checkpointer), carries out the plan's node faults
// with real signals (kill9: SIGKILL, stop: SIGSTOP, cut: SIGSTOP then
// SIGCONT, crash: SIGUSR1), and prints the run and its recovery timeline as keel train does.
// With --respawn-nodes a killed node is started again on its port, as a
// process supervisor would, and the job uses it again once it answers.
// With --connect it starts no node and uses `keel node` processes already
// running (here or on other hosts, sharing the checkpoint directory's
// filesystem), which is also how a restarted coordinator (--resume DIR)
// rejoins the nodes of the run it continues. With --tls-cert, --tls-key and
// --tls-ca every link runs TLS with certificates verified both ways: nodes
// it starts use the same certificate, nodes named by --connect must present
// a certificate stating the NAME of their NAME@HOST:PORT (default HOST).
// With --node-fault-command CMD the plan's node faults are CMD's to carry
// out (`CMD KIND N MS`, e.g. `partition 1 2000`): a harness that owns the
// nodes' network, as scripts/netns-cluster.sh does with network namespaces,
// carries out the network's faults (partition, split, oneway) and any other.
// Last it prints the peak resident set size of every process of the run:
// its own (the coordinator's, getrusage) and each node process it started
// and reaped (wait4), killed ones included: exact figures, the kernel's.
#include <signal.h>
#include <sys/resource.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "actors/cluster/cluster_placement.hpp"
#include "cluster_flags.hpp"
#include "cli_flags.hpp"
#include "admin_command.hpp"
#include "cluster_work_dir.hpp"
#include "commands.hpp"
#include "messages/errors.hpp"
#include "node_processes.hpp"

namespace keel::cli {

namespace {

// How long a started keel node has to print where it listens: seconds
// normally, but a sanitizer build on a loaded machine took more than 10.
constexpr std::chrono::seconds node_start_timeout{30};

std::string self_program() {
  char buf[4096];
  auto n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("keel");
}

// Carries out node faults by running `command KIND N MS` through /bin/sh
// and waiting for it: the harness that owns the nodes does the rest (and
// heals a partition after MS on its own). Its exit status other than 0 is
// the fault's error.
caf::error run_fault_command(const std::string& command, uint32_t node, fault_kind how,
                             std::chrono::milliseconds away) {
  std::string script = command + " \"$@\"";
  std::vector<std::string> argv_s = {"/bin/sh", "-c", script, "keel-node-fault", to_string(how),
                                     std::to_string(node), std::to_string(away.count())};
  std::vector<char*> argv;
  for (auto& x : argv_s) argv.push_back(x.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (int rc = ::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv.data(), environ); rc != 0)
    return make_error(errc::io_error, "--node-fault-command: cannot run /bin/sh: " + std::string(std::strerror(rc)));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return {};
  return make_error(errc::io_error, "--node-fault-command '" + command + "' " + to_string(how) + " " +
                                        std::to_string(node) + " " + std::to_string(away.count()) + " failed (status " +
                                        std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
}

// The cluster's secret: --secret-file's (`file` is set to it), else with
// --connect $KEEL_CLUSTER_SECRET, else a fresh one written to `work` for
// the nodes this command starts (`file` is set to it).
caf::expected<cluster_secret> choose_secret(const cluster_flags& f, const cluster_work_dir& work,
                                            std::filesystem::path& file) {
  if (!f.secret_file.empty()) {  // the nodes started get the same file
    file = std::filesystem::absolute(f.secret_file);
    return cluster_secret::from_file(file);
  }
  if (!f.connect.empty()) {
    if (auto env = std::getenv("KEEL_CLUSTER_SECRET"))
      return cluster_secret::from_bytes(env, "KEEL_CLUSTER_SECRET");
    return make_error(errc::invalid_argument,
                      "no cluster secret for --connect: pass --secret-file FILE or set KEEL_CLUSTER_SECRET");
  }
  auto written = work.write_secret();
  if (!written)
    return written.error();
  file = *written;
  return cluster_secret::from_file(file);
}

// The flags every started node gets besides its secret.
std::vector<std::string> node_process_flags(const cluster_flags& f, bool tls) {
  std::vector<std::string> out = {"--heartbeat-ms", std::to_string(f.heartbeat_ms),
                                  "--connection-timeout-ms", std::to_string(f.timeout_ms)};
  if (f.no_data_plane)
    out.push_back("--no-data-plane");
  if (tls)
    for (auto [flag, file] : {std::pair{"--tls-cert", f.tls.cert}, {"--tls-key", f.tls.key},
                              {"--tls-ca", f.tls.ca}}) {
      out.push_back(flag);
      out.push_back(std::filesystem::absolute(file).string());
    }
  return out;
}

// Carries out node faults on the node processes with real signals (kill9:
// SIGKILL, and a fresh process on its port with --respawn-nodes; stop:
// SIGSTOP; cut: SIGSTOP, then SIGCONT from a timer thread after `away`;
// crash: SIGUSR1, which keel node takes as "die with SIGKILL in the middle
// of your next checkpoint file write"),
// and joins: a new node process, added to the running job's placement.
// Called from the job's thread; join() waits for the cuts' timers.
class signal_node_faults {
 public:
  signal_node_faults(node_processes& procs, bool respawn) : procs_(procs), respawn_(respawn) {}
  ~signal_node_faults() { join(); }

  // Where joins go: the job's placement, and the name started nodes'
  // certificates state (with TLS).
  void joins_to(std::shared_ptr<cluster_placement> placement, std::string tls_name) {
    std::lock_guard<std::mutex> guard(mtx_);
    placement_ = std::move(placement);
    tls_name_ = std::move(tls_name);
  }

  caf::error operator()(uint32_t node, fault_kind how, std::chrono::milliseconds away) {
    std::lock_guard<std::mutex> guard(mtx_);
    if (how == fault_kind::join) {
      if (!placement_ || node != procs_.size())
        return make_error(errc::invalid_argument, "node:" + std::to_string(node) + " cannot join: keel cluster "
                                                  "started " + std::to_string(procs_.size()) + " nodes");
      auto port = procs_.start(node, node_start_timeout);
      if (!port)
        return port.error();
      std::cout << "keel cluster: node:" << node << " listening on 127.0.0.1:" << *port << " (pid "
                << procs_.pid(node) << "), joining the job" << std::endl;
      return placement_->add_node({"127.0.0.1", *port, tls_name_});
    }
    if (how == fault_kind::kill9) {
      if (auto err = procs_.signal(node, SIGKILL))
        return err;
      if (respawn_)
        if (auto port = procs_.start(node, node_start_timeout); !port)
          return port.error();
      return {};
    }
    if (how == fault_kind::crash)
      return procs_.signal(node, SIGUSR1);  // it dies later, when it writes; not respawned
    if (auto err = procs_.signal(node, SIGSTOP))
      return err;
    if (how == fault_kind::cut) {
      auto pid = procs_.pid(node);
      timers_.emplace_back([pid, away] {
        std::this_thread::sleep_for(away);  // a timer: the partition heals after `away`
        ::kill(pid, SIGCONT);
      });
    }
    return {};
  }

  void join() {
    std::lock_guard<std::mutex> guard(mtx_);
    for (auto& t : timers_) t.join();
    timers_.clear();
  }

 private:
  node_processes& procs_;
  bool respawn_;
  std::shared_ptr<cluster_placement> placement_;
  std::string tls_name_;
  std::mutex mtx_;
  std::vector<std::thread> timers_;
};

// The peak RSS lines: this process's, then each node process reaped.
void print_peak_rss(const node_processes& procs) {
  rusage self{};
  ::getrusage(RUSAGE_SELF, &self);
  std::cout << "keel cluster: peak RSS " << self.ru_maxrss << " kB: the coordinator (pid " << ::getpid() << ")\n";
  for (auto& p : procs.ended())
    std::cout << "keel cluster: peak RSS " << p.peak_rss_kb << " kB: node:" << p.node << " (pid " << p.pid
              << (p.killed ? ", killed with SIGKILL" : ", stopped") << ")\n";
}

}  // namespace

int cluster(const args& a) {
  for (auto& x : a)
    if (x == "--help" || x == "-h") {
      std::cout << cluster_help;
      return 0;
    }
  auto flags = parse_cluster_flags(a);
  if (!flags) {
    std::cerr << "keel cluster: " << error_text(flags.error()) << "\n";
    return 2;
  }
  if (auto status = check_usage(*flags))
    return *status;
  bool connect = !flags->connect.empty();
  std::shared_ptr<const tls_context> tls;
  if (flags->tls.any()) {
    auto ctx = tls_context::load(flags->tls);
    if (!ctx) {
      std::cerr << "keel cluster: " << describe(ctx.error()) << "\n";
      return 2;
    }
    tls = *ctx;
  }
  // Secrets of coordinators killed with kill -9 go first (cluster_work_dir.hpp).
  sweep_stale_work_dirs();
  auto work = cluster_work_dir::make();
  if (!work) {
    std::cerr << "keel cluster: " << describe(work.error()) << "\n";
    return 1;
  }
  std::filesystem::path secret_path;
  auto secret = choose_secret(*flags, *work, secret_path);
  if (!secret) {
    std::cerr << "keel cluster: " << describe(secret.error()) << "\n";
    return connect ? 2 : 1;
  }
  node_processes procs(self_program(), secret_path, node_process_flags(*flags, tls != nullptr));
  signal_node_faults node_faults(procs, flags->respawn);
  cluster_placement_config pc;
  pc.secret = *secret;
  pc.tls = tls;
  pc.settings.heartbeat_interval = std::chrono::milliseconds(flags->heartbeat_ms);
  pc.settings.connection_timeout = std::chrono::milliseconds(flags->timeout_ms);
  std::shared_ptr<cluster_placement> used;  // for where the children ended
  std::unique_ptr<metrics_http_server> admin;  // --admin-port
  // Called once keel train's flags are good: only then do nodes start.
  auto setup = [&](placed_job_config& cfg, const std::string& model_name, const model_options& mo) -> caf::error {
    if (connect)
      pc.nodes = flags->connect;
    for (size_t i = 0; i < pc.nodes.size(); ++i)
      std::cout << "keel cluster: node:" << i << " at " << pc.nodes[i].host << ":" << pc.nodes[i].port
                << std::endl;
    for (uint32_t i = 0; !connect && i < flags->nodes; ++i) {
      auto port = procs.start(i, node_start_timeout);
      if (!port)
        return port.error();
      pc.nodes.push_back({"127.0.0.1", *port, tls ? tls->name() : std::string()});
      std::cout << "keel cluster: node:" << i << " listening on 127.0.0.1:" << *port << " (pid " << procs.pid(i)
                << ")" << std::endl;
    }
    pc.model.name = model_name;
    pc.model.data_dir = mo.data_dir.string();
    pc.model.options = mo;
    pc.peer_copy = flags->peer_copy;
    pc.node_wait = std::chrono::milliseconds(flags->node_wait_ms);
    pc.worker_slots = flags->worker_slots;
    pc.pre_copy = flags->pre_copy;
    cfg.checkpoints.peer_copy = pc.peer_copy;
    if (flags->application_loop) {
      cfg.application_loop = true;
      pc.client_workers = cfg.training.workers;
      pc.client_wait = std::chrono::milliseconds(flags->client_wait_ms);
      std::cout << "keel cluster: waiting up to " << flags->client_wait_ms / 1000 << " s for client processes "
                << "running the loops of workers 0.." << cfg.training.workers - 1 << ": join node:0 at "
                << pc.nodes.front().host << ":" << pc.nodes.front().port << " with the secret "
                << (secret_path.empty() ? std::string("in $KEEL_CLUSTER_SECRET") : "in " + secret_path.string())
                << std::endl;
    }
    auto placement = std::make_shared<cluster_placement>(pc);
    cfg.placement = placement;
    used = placement;
    node_faults.joins_to(placement, tls ? tls->name() : std::string());
    if (flags->admin_port) {
      std::string error;
      admin = serve_admin(placement, *secret, flags->admin_address, *flags->admin_port, error);
      if (!admin)
        return make_error(errc::invalid_argument, "--admin-port: " + error);
      auto at = flags->admin_address + ":" + std::to_string(admin->port());
      std::cout << "keel cluster: admin on http://" << at << "/admin/status (keel admin --at " << at
                << (secret_path.empty() ? std::string(" with $KEEL_CLUSTER_SECRET")
                                        : " --secret-file " + secret_path.string())
                << ")" << std::endl;
    }
    if (!flags->fault_command.empty())
      cfg.faults.node_faults = [command = flags->fault_command](uint32_t node, fault_kind how,
                                                                std::chrono::milliseconds away) {
        return run_fault_command(command, node, how, away);
      };
    else if (!connect)
      cfg.faults.node_faults = [&node_faults](uint32_t node, fault_kind how, std::chrono::milliseconds away) {
        return node_faults(node, how, away);
      };
    return {};
  };
  auto status = train_with(flags->rest, "keel cluster", setup);
  admin.reset();  // before the nodes stop: no request reaches a stopped job
  if (used)
    std::cout << "keel cluster: where the children ran last: " << used->where() << "\n";
  node_faults.join();
  procs.stop_all();
  if (procs.size() > 0)
    std::cout << "keel cluster: " << procs.size() << " nodes stopped\n";
  print_peak_rss(procs);
  return status;
}

}  // namespace keel::cli
