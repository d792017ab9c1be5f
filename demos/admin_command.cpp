// `keel admin --at HOST:PORT [--secret-file FILE] status|drain NODE|move CHILD NODE|add HOST:PORT|join W|leave W`:
// an operator's requests to a running keel cluster (--admin-port), and the
// endpoint's server side for keel cluster. Exit status: 0 the cluster
// answered yes, 1 it refused (the reason printed) or could not be reached,
// 2 bad usage.
#include "admin_command.hpp"

#include <chrono>
#include <ctime>
#include <iostream>

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include "actors/cluster/cluster_admin.hpp"
#include "cli_flags.hpp"
#include "commands.hpp"
#include "messages/errors.hpp"

namespace keel::cli {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

int64_t unix_now() {
  return static_cast<int64_t>(std::time(nullptr));
}

struct http_reply {
  int status = 0;
  std::string body;
};

// One request to host:port, its whole reply read to the connection's end,
// within `timeout`; an error naming the address and what went wrong.
caf::expected<http_reply> exchange(const node_address& at, const std::string& request, std::chrono::seconds timeout) {
  asio::io_context io;
  tcp::socket socket(io);
  tcp::resolver resolver(io);
  std::string where = at.host + ":" + std::to_string(at.port);
  boost::system::error_code failed;
  std::string reply;
  std::array<char, 4096> chunk;
  std::function<void()> read_more = [&] {
    socket.async_read_some(asio::buffer(chunk), [&](boost::system::error_code ec, size_t n) {
      reply.append(chunk.data(), n);
      if (ec) {
        if (ec != asio::error::eof)
          failed = ec;
        return;
      }
      read_more();
    });
  };
  resolver.async_resolve(at.host, std::to_string(at.port), [&](boost::system::error_code ec, tcp::resolver::results_type r) {
    if (ec) {
      failed = ec;
      return;
    }
    asio::async_connect(socket, r, [&](boost::system::error_code ec, const tcp::endpoint&) {
      if (ec) {
        failed = ec;
        return;
      }
      asio::async_write(socket, asio::buffer(request), [&](boost::system::error_code ec, size_t) {
        if (ec) {
          failed = ec;
          return;
        }
        read_more();
      });
    });
  });
  io.run_for(timeout);
  if (!io.stopped())
    return make_error(errc::io_error, "the admin endpoint at " + where + " did not answer within " +
                                        std::to_string(timeout.count()) + " s");
  if (failed)
    return make_error(errc::io_error, "the admin endpoint at " + where + ": " + failed.message());
  http_reply out;
  auto sp = reply.find(' ');
  auto body = reply.find("\r\n\r\n");
  if (reply.compare(0, 5, "HTTP/") != 0 || sp == std::string::npos || body == std::string::npos)
    return make_error(errc::io_error, "the admin endpoint at " + where + " did not answer HTTP");
  out.status = std::atoi(reply.c_str() + sp + 1);
  out.body = reply.substr(body + 4);
  return out;
}

// The status JSON as lines an operator reads.
void print_status(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.contains("nodes")) {
    std::cout << body;
    return;
  }
  for (auto& n : j["nodes"]) {
    std::string children;
    for (auto& c : n["children"]) children += (children.empty() ? "" : ", ") + c.get<std::string>();
    char bytes[32];
    std::snprintf(bytes, sizeof bytes, "%.1f kB", n["shard_bytes"].get<double>() / 1e3);
    auto shards = n["shards"].get<int>(), workers = n["workers"].get<int>();
    std::cout << n["node"].get<std::string>() << " at " << n["address"].get<std::string>() << ": "
              << n["state"].get<std::string>() << ", " << shards << (shards == 1 ? " shard (" : " shards (") << bytes
              << "), " << workers << (workers == 1 ? " worker" : " workers")
              << (children.empty() ? "" : ": " + children) << "\n";
  }
  std::cout << "moving: " << (j["moving"].is_null() ? std::string("none") : j["moving"].get<std::string>()) << "; "
            << j["queued_moves"].get<int>() << " queued; newest checkpoint at step "
            << j["committed_step"].get<uint64_t>() << "\n";
}

struct admin_flags {
  std::string at, secret_file;
  std::vector<std::string> words;  // the request and its operands
  bool json = false;
  uint32_t timeout_s = 30;
};

}  // namespace

int admin(const args& a) {
  admin_flags g;
  command_flags flags{"admin", po::options_description(), {}, {}};
  flags.visible.add_options()("help", "show this help")
    ("at", text_flag(&g.at, "HOST:PORT", false), "keel cluster's admin endpoint (its --admin-port)")
    ("secret-file", text_flag(&g.secret_file, "FILE", false),
     "file holding the cluster secret (keel cluster prints it; else $KEEL_CLUSTER_SECRET)")
    ("json", po::bool_switch(&g.json), "status: print the JSON as the endpoint sends it")
    ("timeout-s", number_flag<uint32_t>(&g.timeout_s, "S", 1, 3600), "how long to wait for the answer");
  flags.hidden.add_options()("request", po::value<std::vector<std::string>>(&g.words), "the request");
  flags.positional.add("request", 3);  // more: "unexpected argument"
  po::variables_map vm;
  if (auto status = parse_flags(flags, a, vm))
    return *status;
  if (vm.count("help")) {
    print_help(std::cout, "keel admin --at HOST:PORT [FLAGS] REQUEST",
               "Asks a running keel cluster (started with --admin-port) for:\n"
               "  status                 every node: address, state, shards and their bytes, workers\n"
               "  drain node:N           move node N's children away one at a time, then release it\n"
               "  move CHILD node:N      move shard:S or worker:W to node N (queued after other moves)\n"
               "  add HOST:PORT          add the keel node listening there to the job (NAME@HOST:PORT\n"
               "                         with TLS), then balance onto it\n"
               "  join worker:W          worker W, held in reserve (--worker-changes reserve:worker:W),\n"
               "                         joins the job at the first step it can take\n"
               "  leave worker:W         worker W leaves the job at the first step it can take\n"
               "Each request proves the cluster secret (HMAC over the request and the time).\n"
               "Exit status: 0 done or accepted, 1 refused or unreachable, 2 bad usage.",
               flags.visible);
    return 0;
  }
  std::string why;
  auto at = parse_node_address(g.at, why);
  if (g.at.empty() || !at)
    return usage_error("admin", "--at", g.at.empty() ? "is needed: keel cluster's admin endpoint, HOST:PORT" : why);
  auto secret = cluster_secret::from_file_or_env(g.secret_file);
  if (!secret)
    return usage_error("admin", "--secret-file", error_text(secret.error()));
  if (g.words.empty())
    return usage_error("admin", "", "no request: status, drain NODE, move CHILD NODE or add HOST:PORT");
  const auto& verb = g.words[0];
  const std::vector<std::pair<std::string, size_t>> arity{{"status", 1}, {"drain", 2}, {"move", 3}, {"add", 2},
                                                          {"join", 2},   {"leave", 2}};
  auto known = std::find_if(arity.begin(), arity.end(), [&](auto& v) { return v.first == verb; });
  if (known == arity.end())
    return usage_error("admin", "", "unknown request '" + verb + "': status, drain NODE, move CHILD NODE, add HOST:PORT, join WORKER or leave WORKER");
  if (g.words.size() != known->second)
    return usage_error("admin", "", verb + " takes " + std::to_string(known->second - 1) + " operand" +
                                       (known->second == 2 ? "" : "s") + ", not " + std::to_string(g.words.size() - 1));
  std::string method = verb == "status" ? "GET" : "POST", target = "/admin/" + verb;
  if (verb == "join" || verb == "leave")
    target = "/admin/workers?" + verb + "=" + g.words[1];
  else if (verb == "drain")
    target += "?node=" + g.words[1];
  else if (verb == "move")
    target += "?child=" + g.words[1] + "&to=" + g.words[2];
  else if (verb == "add") {
    auto node = parse_node_address(g.words[1], why);
    if (!node)
      return usage_error("admin", "", "add: " + why);
    target += "?address=" + node->host + ":" + std::to_string(node->port) +
              (node->tls_name.empty() ? "" : "&name=" + node->tls_name);
  }
  for (unsigned char c : target)
    if (c <= 0x20 || c >= 0x7f || c == '#' || c == '%')
      return usage_error("admin", "", "'" + target + "' holds a character a request cannot carry");
  auto request = method + " " + target + " HTTP/1.1\r\nHost: " + at->host + "\r\nX-Keel-Admin: " +
                 admin_proof(*secret, method, target, unix_now()) + "\r\nConnection: close\r\n\r\n";
  auto reply = exchange(*at, request, std::chrono::seconds(g.timeout_s));
  if (!reply) {
    std::cerr << "keel admin: " << error_text(reply.error()) << "\n";
    return 1;
  }
  if (reply->status / 100 != 2) {
    std::cerr << "keel admin: " << verb << " refused (" << reply->status << "): " << reply->body;
    return 1;
  }
  if (verb == "status" && !g.json)
    print_status(reply->body);
  else
    std::cout << reply->body;
  return 0;
}

std::unique_ptr<metrics_http_server> serve_admin(std::shared_ptr<cluster_placement> placement, cluster_secret secret,
                                                 const std::string& address, uint16_t port, std::string& error) {
  cluster_admin_ops ops;
  ops.status = [placement] { return placement->status_json(); };
  ops.drain = [placement](uint32_t node) -> caf::error {
    if (auto err = placement->drain(node))
      return err;
    placement->note(node, "drain requested by an operator (keel admin): its shards and workers move to the "
                          "other nodes, then it is released");
    return {};
  };
  ops.move = [placement](actor_id child, uint32_t node) -> caf::error {
    if (auto err = placement->move(child, node))
      return err;
    placement->note(node, "move of " + to_string(child) + " here requested by an operator (keel admin)");
    return {};
  };
  ops.add = [placement](const node_address& a) -> caf::expected<std::string> {
    if (auto err = placement->add_node(a))
      return err;
    return "node:" + std::to_string(placement->nodes() - 1) + " at " + a.host + ":" + std::to_string(a.port) +
           " joined the job; the moves that balance it follow (keel admin status shows them)";
  };
  // The job's timeline has the change (membership worker:W: joins at step S ...).
  ops.workers = [placement](const std::string& item) { return placement->change_workers(item); };
  return serve_cluster_admin(std::make_shared<cluster_admin>(std::move(secret), std::move(ops)), address, port,
                             error);
}

}  // namespace keel::cli
