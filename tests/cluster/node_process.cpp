#include "node_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <doctest/doctest.h>

extern char** environ;

namespace keel::test {

namespace {

using steady = std::chrono::steady_clock;

int remaining_ms(steady::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

}  // namespace

std::unique_ptr<node_process> node_process::start(const std::vector<std::string>& args,
                                                  std::chrono::milliseconds timeout) {
  auto p = launch(args);
  auto line = p->wait_stdout("keel node: listening on ", timeout);
  REQUIRE_MESSAGE(line, "no listening line from keel node within " << timeout.count() << " ms; its log:\n" << p->log());
  // "keel node: listening on HOST:PORT (node ID)" (no std::regex: its
  // -Wmaybe-uninitialized under ASan breaks the warnings-as-errors build).
  auto on = line->find("listening on ");
  auto space = line->find(' ', on + 13);
  auto colon = line->rfind(':', space);
  auto id_at = line->find("(node ", space);
  auto id_end = line->find(')', id_at);
  REQUIRE_MESSAGE((space != std::string::npos && colon != std::string::npos && colon > on &&
                   id_at != std::string::npos && id_end != std::string::npos),
                  "unexpected listening line: " << *line);
  auto port = line->substr(colon + 1, space - colon - 1);
  REQUIRE_MESSAGE((!port.empty() && port.find_first_not_of("0123456789") == std::string::npos),
                  "unexpected listening line: " << *line);
  p->port_ = static_cast<uint16_t>(std::stoul(port));
  p->node_id_ = line->substr(id_at + 6, id_end - id_at - 6);
  return p;
}

std::unique_ptr<node_process> node_process::launch(const std::vector<std::string>& args, const std::string& command) {
  std::unique_ptr<node_process> p(new node_process);
  char log_template[] = "/tmp/keel-node-log-XXXXXX";
  int log_fd = ::mkstemp(log_template);
  REQUIRE(log_fd >= 0);
  p->log_path_ = log_template;
  int in[2], out[2];
  REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, log_fd, 2);
  std::vector<std::string> argv_s{KEEL_BINARY, command};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s)
    argv.push_back(s.data());
  argv.push_back(nullptr);
  int rc = ::posix_spawn(&p->pid_, KEEL_BINARY, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  ::close(log_fd);
  p->stdin_fd_ = in[1];
  p->stdout_fd_ = out[0];
  REQUIRE_MESSAGE(rc == 0, "posix_spawn " << KEEL_BINARY << ": " << std::strerror(rc));
  return p;
}

node_process::~node_process() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
  close_stdin();
  if (stdout_fd_ >= 0)
    ::close(stdout_fd_);
  if (!log_path_.empty())
    ::unlink(log_path_.c_str());
}

void node_process::signal(int sig) const {
  if (!status_)
    ::kill(pid_, sig);
}

std::optional<int> node_process::wait_exit(std::chrono::milliseconds timeout) {
  wait_until(
    [&] {
      if (status_)
        return true;
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_)
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return status_.has_value();
    },
    timeout);
  return status_;
}

std::optional<std::string> node_process::wait_stdout(const std::string& text, std::chrono::milliseconds timeout) {
  auto deadline = steady::now() + timeout;
  for (;;) {
    for (size_t nl; (nl = pending_.find('\n')) != std::string::npos;) {
      auto line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      if (line.find(text) != std::string::npos)
        return line;
    }
    pollfd pfd{stdout_fd_, POLLIN, 0};
    if (::poll(&pfd, 1, remaining_ms(deadline)) <= 0)
      return std::nullopt;
    char buf[4096];
    auto n = ::read(stdout_fd_, buf, sizeof buf);
    if (n <= 0)
      return std::nullopt;  // the child closed its output (it ended)
    pending_.append(buf, static_cast<size_t>(n));
  }
}

std::string node_process::log() const {
  std::ifstream in(log_path_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool node_process::wait_log(const std::string& text, std::chrono::milliseconds timeout) const {
  return wait_until([&] { return log().find(text) != std::string::npos; }, timeout);
}

void node_process::close_stdin() {
  if (stdin_fd_ >= 0)
    ::close(stdin_fd_);
  stdin_fd_ = -1;
}

}  // namespace keel::test
