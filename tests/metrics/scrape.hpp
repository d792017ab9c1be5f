#pragma once
// What the metrics tests read with: a strict reader of Prometheus text
// exposition (every line a HELP, a TYPE or a well-formed sample of a family
// announced before it), `curl` run as a process, and a raw TCP client for
// requests curl will not send.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

namespace keel::test {

struct exposition {
  std::map<std::string, double> samples;    // `name{labels}` as written -> value
  std::map<std::string, std::string> help;  // family -> HELP text
  std::map<std::string, std::string> type;  // family -> TYPE
  std::string error;                        // the first line that is not exposition

  std::optional<double> at(const std::string& series) const {
    auto it = samples.find(series);
    if (it == samples.end())
      return std::nullopt;
    return it->second;
  }
};

// The family a sample belongs to: its name without a histogram's suffix.
inline std::string family_of(const std::string& name, const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    std::string s(suffix);
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      auto base = name.substr(0, name.size() - s.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram")
        return base;
    }
  }
  return name;
}

inline exposition read_exposition(const std::string& text) {
  static const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*))");
  static const std::regex type(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped))");
  static const std::regex sample(
    R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:\\[\\"n]|[^"\\\n])*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:\\[\\"n]|[^"\\\n])*")*\})? (NaN|[+-]Inf|-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?))");
  exposition out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, help)) {
      out.help[m[1]] = m[2];
    } else if (std::regex_match(line, m, type)) {
      if (!out.help.count(m[1]))
        return out.error = "TYPE before HELP: " + line, out;
      out.type[m[1]] = m[2];
    } else if (std::regex_match(line, m, sample)) {
      if (!out.type.count(family_of(m[1], out.type)))
        return out.error = "a sample of a family not announced: " + line, out;
      out.samples[m[1].str() + m[2].str()] = m[3] == "NaN" ? NAN : std::stod(m[3]);
    } else {
      return out.error = "not exposition: '" + line + "'", out;
    }
  }
  if (text.empty() || text.back() != '\n')
    out.error = "the text does not end with a newline";
  return out;
}

struct http_reply {
  int status = 0;       // 0: no HTTP response
  std::string headers;  // the status line and headers
  std::string body;
  std::string raw;
};

inline http_reply split_reply(std::string raw) {
  http_reply r;
  r.raw = raw;
  auto end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || end == std::string::npos)
    return r;
  r.headers = raw.substr(0, end);
  r.body = raw.substr(end + 4);
  r.status = std::atoi(raw.substr(9, 3).c_str());
  return r;
}

// Runs `command`, returning its stdout and exit status.
inline std::pair<std::string, int> run_process(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int raw = ::pclose(p);
  return {out, WIFEXITED(raw) ? WEXITSTATUS(raw) : -1};
}

// `curl -i` with `options` against `url`: the reply with its headers.
inline http_reply curl(const std::string& url, const std::string& options = {}) {
  auto [out, status] = run_process("curl -sS -i --max-time 20 " + options + " '" + url + "' 2>&1");
  INFO("curl output: " << out);
  REQUIRE_MESSAGE(status == 0, "curl failed with status " << status);
  return split_reply(out);
}

// Sends `bytes` over a fresh TCP connection to 127.0.0.1:`port`, closes
// the sending side, and reads until the server closes (10 s at most).
inline http_reply raw_request(uint16_t port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  size_t sent = 0;
  while (sent < bytes.size()) {
    auto n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0)
      break;  // the server may answer and stop reading before all is sent
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string got;
  std::array<char, 4096> buf;
  for (;;) {
    auto n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0)
      break;
    got.append(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return split_reply(got);
}

}  // namespace keel::test
