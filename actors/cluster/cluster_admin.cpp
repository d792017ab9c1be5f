#include "actors/cluster/cluster_admin.hpp"

#include <cctype>
#include <ctime>
#include <vector>

#include "actors/metrics/metrics_http.hpp"
#include "messages/errors.hpp"
#include "messages/hex.hpp"

namespace keel {

namespace {

const char* const proof_label = "keel-admin";
const char* const proof_header = "x-keel-admin:";

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The value of header `name` (lower case, with its colon) in `head`, trimmed;
// nothing when absent.
std::optional<std::string> header(const std::string& head, const std::string& name) {
  size_t from = head.find('\n');
  while (from != std::string::npos && from + 1 < head.size()) {
    auto end = head.find('\n', from + 1);
    auto line = head.substr(from + 1, end == std::string::npos ? std::string::npos : end - from - 1);
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (lower(line.substr(0, name.size())) == name) {
      auto value = line.substr(name.size());
      value.erase(0, value.find_first_not_of(" \t"));
      value.erase(value.find_last_not_of(" \t") + 1);
      return value;
    }
    from = end;
  }
  return std::nullopt;
}

// "a=1&b=2" as a map; false when an item is not NAME=VALUE or holds a
// character an admin value never has (no percent-decoding is needed).
bool parse_query(const std::string& query, std::map<std::string, std::string>& out) {
  size_t from = 0;
  while (from < query.size()) {
    auto amp = query.find('&', from);
    auto item = query.substr(from, amp == std::string::npos ? std::string::npos : amp - from);
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return false;
    auto value = item.substr(eq + 1);
    for (unsigned char c : value)
      if (!(std::isalnum(c) || c == ':' || c == '.' || c == '-' || c == '_' || c == '@' || c == '[' || c == ']'))
        return false;
    out[item.substr(0, eq)] = value;
    if (amp == std::string::npos)
      break;
    from = amp + 1;
  }
  return true;
}

std::string refused(const caf::error& err) {
  return http_plain("409 Conflict", describe(err));
}

// The index of a node named "node:N" (or N) in `text`, if it names one.
bool node_index(const std::optional<std::string>& text, uint32_t& index) {
  if (!text)
    return false;
  auto id = parse_actor_id(text->rfind("node:", 0) == 0 ? *text : "node:" + *text);
  if (!id || !id->is(actor_kind::node))
    return false;
  index = id->index;
  return true;
}

}  // namespace

std::string admin_proof(const cluster_secret& secret, const std::string& method, const std::string& target,
                        int64_t unix_seconds, const std::string& nonce) {
  auto challenge = std::to_string(unix_seconds) + " " + nonce;
  auto mac = secret.prove(proof_label, reinterpret_cast<const uint8_t*>(challenge.data()), challenge.size(),
                          method + " " + target);
  return challenge + " " + hex_of(mac.data(), mac.size());
}

std::string admin_proof(const cluster_secret& secret, const std::string& method, const std::string& target,
                        int64_t unix_seconds) {
  auto nonce = random_bytes(16);
  return admin_proof(secret, method, target, unix_seconds, hex_of(nonce.data(), nonce.size()));
}

std::string cluster_admin::respond(const std::string& head, int64_t now) {
  std::string method, target;
  if (!parse_request_head(head, method, target))
    return http_plain("400 Bad Request", "not an HTTP/1.x request line: expected METHOD /PATH HTTP/1.1");
  auto question = target.find('?');
  auto path = target.substr(0, question);
  auto query = question == std::string::npos ? std::string() : target.substr(question + 1);
  const bool known = path == "/admin/status" || path == "/admin/drain" || path == "/admin/move" ||
                     path == "/admin/add" || path == "/admin/workers";
  if (!known)
    return http_plain("404 Not Found",
                      "the admin endpoint serves /admin/status, /admin/drain, /admin/move, /admin/add and /admin/workers");
  const char* allowed = path == "/admin/status" ? "GET" : "POST";
  if (method != allowed)
    return http_plain("405 Method Not Allowed", path + " answers " + allowed + " only",
                      std::string("Allow: ") + allowed + "\r\n");
  // The proof: fresh, not seen before, and right.
  auto proof = header(head, proof_header);
  if (!proof)
    return http_plain("401 Unauthorized", "no X-Keel-Admin header: requests prove they know the cluster secret (keel admin)");
  auto space = proof->find(' ');
  auto second = space == std::string::npos ? space : proof->find(' ', space + 1);
  auto when_text = proof->substr(0, space);
  if (second == std::string::npos || when_text.empty() || when_text.size() > 18 ||
      when_text.find_first_not_of("0123456789") != std::string::npos)
    return http_plain("401 Unauthorized", "X-Keel-Admin is not '<unix seconds> <nonce> <hex proof>'");
  const auto nonce = proof->substr(space + 1, second - space - 1);
  const int64_t when = std::stoll(when_text);
  const int64_t window = window_.count();
  if (when < now - window || when > now + window)
    return http_plain("401 Unauthorized", "X-Keel-Admin's time is " + std::to_string(when - now) +
                                            " s from this server's clock (at most " + std::to_string(window) +
                                            " s either way)");
  auto expected = admin_proof(secret_, method, target, when, nonce);
  if (!equal_in_constant_time(reinterpret_cast<const uint8_t*>(expected.data()), expected.size(),
                              reinterpret_cast<const uint8_t*>(proof->data()), proof->size()))
    return http_plain("401 Unauthorized", "X-Keel-Admin does not prove the cluster secret for " + method + " " + target);
  for (auto it = seen_.begin(); it != seen_.end();)
    it = it->second < now - 2 * window ? seen_.erase(it) : std::next(it);
  if (!seen_.emplace(expected, when).second)
    return http_plain("401 Unauthorized", "this request was made already (a replay)");
  std::map<std::string, std::string> q;
  if (!parse_query(query, q))
    return http_plain("400 Bad Request", "the query '" + query + "' is not NAME=VALUE&... of plain values");
  auto arg = [&](const std::string& name) -> std::optional<std::string> {
    auto it = q.find(name);
    return it == q.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  if (path == "/admin/status")
    return http_response("200 OK", "application/json", ops_.status());
  if (path == "/admin/drain") {
    uint32_t node = 0;
    if (!node_index(arg("node"), node))
      return http_plain("400 Bad Request", "drain needs node=node:N");
    if (auto err = ops_.drain(node))
      return refused(err);
    return http_plain("202 Accepted", "node:" + std::to_string(node) +
                                        " drains: its children move to the other nodes one at a time, then it "
                                        "is released");
  }
  if (path == "/admin/move") {
    auto child = arg("child") ? parse_actor_id(*arg("child")) : std::nullopt;
    uint32_t node = 0;
    const bool movable = child && (child->is(actor_kind::shard) || child->is(actor_kind::worker));
    if (!movable || !node_index(arg("to"), node))
      return http_plain("400 Bad Request", "move needs child=shard:S or worker:W and to=node:N");
    if (auto err = ops_.move(*child, node))
      return refused(err);
    return http_plain("202 Accepted", "the move of " + to_string(*child) + " to node:" + std::to_string(node) +
                                        " is queued: it runs after the moves queued before it");
  }
  if (path == "/admin/workers") {
    auto join = arg("join"), leave = arg("leave");
    auto who = join ? join : leave;
    auto worker = who ? parse_actor_id(*who) : std::nullopt;
    if (!worker || !worker->is(actor_kind::worker) || (join && leave))
      return http_plain("400 Bad Request", "workers needs join=worker:W or leave=worker:W");
    auto item = std::string(join ? "join:" : "leave:") + to_string(*worker);
    auto at = ops_.workers(item);
    if (!at)
      return refused(at.error());
    return http_plain("200 OK", to_string(*worker) + (join ? " joins" : " leaves") + " at step " + std::to_string(*at) +
                                  (join ? "" : " (its last step is " + std::to_string(*at - 1) + ")") +
                                  ": every shard and worker holds the new schedule");
  }
  std::string why;
  auto address = arg("address") ? parse_node_address(*arg("address"), why) : std::nullopt;
  if (!address)
    return http_plain("400 Bad Request", "add needs address=HOST:PORT" + (why.empty() ? "" : ": " + why));
  if (auto name = arg("name"))
    address->tls_name = *name;
  auto added = ops_.add(*address);
  if (!added)
    return refused(added.error());
  return http_plain("200 OK", *added);
}

std::unique_ptr<metrics_http_server> serve_cluster_admin(std::shared_ptr<cluster_admin> admin,
                                                         const std::string& address, uint16_t port,
                                                         std::string& error) {
  metrics_http_options o;
  o.name = "admin";
  o.address = address;
  o.port = port;
  o.max_connections = 8;
  return metrics_http_server::serve(
      o, [admin](const std::string& head) { return admin->respond(head, static_cast<int64_t>(std::time(nullptr))); },
      error);
}

}  // namespace keel
