// The text of keel's HTTP endpoints, without a socket: responses, the
// request line's parse, and the metrics page's answer to a request head.
#include <exception>

#include "actors/metrics/metrics_http.hpp"

namespace keel {

namespace {

std::string response(const std::string& status, const std::string& content_type,
                     const std::string& body, const std::string& extra_headers = {}) {
  return http_response(status, content_type, body, extra_headers);
}

std::string plain(const std::string& status, const std::string& why,
                  const std::string& extra_headers = {}) {
  return http_plain(status, why, extra_headers);
}

bool is_token_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '!' || c == '~' || c == '*' || c == '+';
}

}  // namespace

std::string http_response(const std::string& status, const std::string& content_type,
                          const std::string& body, const std::string& extra_headers) {
  return "HTTP/1.1 " + status + "\r\nContent-Type: " + content_type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra_headers +
         "Connection: close\r\n\r\n" + body;
}

std::string http_plain(const std::string& status, const std::string& why,
                       const std::string& extra_headers) {
  return http_response(status, "text/plain; charset=utf-8", why + "\n", extra_headers);
}

bool parse_request_line(const std::string& line, std::string& method, std::string& target) {
  auto sp1 = line.find(' ');
  auto sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == 0 || sp2 == std::string::npos || line.find(' ', sp2 + 1) != std::string::npos)
    return false;
  method = line.substr(0, sp1);
  target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  auto version = line.substr(sp2 + 1);
  for (char c : method)
    if (!is_token_char(c))
      return false;
  for (unsigned char c : target)
    if (c <= 0x20 || c >= 0x7f)
      return false;
  return !target.empty() && target[0] == '/' && (version == "HTTP/1.1" || version == "HTTP/1.0");
}

bool parse_request_head(const std::string& head, std::string& method, std::string& target) {
  auto line = head.substr(0, head.find('\n'));
  if (!line.empty() && line.back() == '\r')
    line.pop_back();
  return parse_request_line(line, method, target);
}

std::string metrics_http_response(const std::string& request_head,
                                  const std::function<std::string()>& render) {
  std::string method, target;
  if (!parse_request_head(request_head, method, target))
    return plain("400 Bad Request", "not an HTTP/1.x request line: expected METHOD /PATH HTTP/1.1");
  auto path = target.substr(0, target.find('?'));
  if (path != "/metrics")
    return plain("404 Not Found", "keel serves /metrics only");
  if (method != "GET")
    return plain("405 Method Not Allowed", "/metrics answers GET only", "Allow: GET\r\n");
  try {
    return response("200 OK", "text/plain; version=0.0.4; charset=utf-8", render());
  } catch (const std::exception& e) {
    return plain("500 Internal Server Error",
                 std::string("rendering the metrics failed: ") + e.what());
  }
}

}  // namespace keel
