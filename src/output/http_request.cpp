// What the metrics endpoint reads: the --metrics-listen address, and a
// request head, answered with the response it gets.
#include "http_request.hpp"

#include <charconv>
#include <exception>
#include <new>
#include <stdexcept>
#include <system_error>

#include <arpa/inet.h>
#include <netinet/in.h>

namespace netlatd {

std::string shown_address(const ListenAddress &a) {
  const bool v6 = a.host.find(':') != std::string::npos;
  return (v6 ? "[" + a.host + "]" : a.host) + ":" + std::to_string(a.port);
}

ListenAddress parse_listen_address(std::string_view text) {
  const std::string shown(text);
  const std::string default_port = std::to_string(kDefaultMetricsPort);
  ListenAddress a;
  std::string_view port = text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    const bool alone = close != std::string_view::npos && close + 1 == text.size();
    if (close == std::string_view::npos || (!alone && text[close + 1] != ':'))
      throw std::invalid_argument("bad listen address '" + shown + "': expected [IPV6]:PORT or [IPV6]");
    a.host = std::string(text.substr(1, close - 1));
    port = alone ? std::string_view(default_port) : text.substr(close + 2);
  } else if (text.find('.') != std::string_view::npos && text.find(':') == std::string_view::npos) {
    a.host = std::string(text);  // an IPv4 address alone
    port = default_port;
  } else if (const auto colon = text.rfind(':'); colon != std::string_view::npos) {
    if (text.find(':') != colon)
      throw std::invalid_argument("bad listen address '" + shown + "': write IPv6 addresses as [ADDR]:PORT");
    a.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
  }
  const bool bracketed = !text.empty() && text.front() == '[';
  if (a.host.empty() && !bracketed)
    a.host = "127.0.0.1";
  unsigned value = 0;
  const auto res = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || res.ec != std::errc{} || res.ptr != port.data() + port.size() || value > 65535)
    throw std::invalid_argument("bad listen address '" + shown + "': port '" + std::string(port) +
                                "' is not a number in 0-65535");
  a.port = static_cast<uint16_t>(value);
  // An address, not a name: a name could resolve to something else tomorrow
  // (or to every interface), and the endpoint has no authentication.
  in6_addr scratch{};
  const bool ok = bracketed ? inet_pton(AF_INET6, a.host.c_str(), &scratch) == 1
                            : inet_pton(AF_INET, a.host.c_str(), &scratch) == 1;
  if (!ok)
    throw std::invalid_argument("bad listen address '" + shown + "': '" + a.host + "' is not an IP" +
                                (bracketed ? "v6" : "v4") + " address (e.g. 127.0.0.1:9659 or [::1]:9659)");
  return a;
}

}  // namespace netlatd

namespace netlatd::http {

namespace {

const char *reason_phrase(int status) {
  switch (status) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 414: return "URI Too Long";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  default: return "Error";
  }
}

// The path of an origin-form request target ("/metrics?x=1" -> "/metrics"),
// %XX escapes decoded, as clients may escape any character; "" when malformed.
std::string target_path(std::string_view target) {
  target = target.substr(0, target.find_first_of("?#"));
  std::string path;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] != '%') {
      path.push_back(target[i]);
      continue;
    }
    unsigned value = 0;
    const char *first = target.data() + i + 1;
    if (i + 2 >= target.size() || std::from_chars(first, first + 2, value, 16).ptr != first + 2)
      return "";
    path.push_back(static_cast<char>(value));
    i += 2;
  }
  return path;
}

std::string http_response(int status, std::string_view content_type, std::string_view body, bool head_only) {
  std::string out;
  out.reserve(160 + (head_only ? 0 : body.size()));
  out.append("HTTP/1.1 ").append(std::to_string(status)).append(" ").append(reason_phrase(status)).append("\r\n");
  if (!content_type.empty())
    out.append("Content-Type: ").append(content_type).append("\r\n");
  if (status == 405)
    out.append("Allow: GET, HEAD\r\n");
  out.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  out.append("Connection: close\r\n\r\n");
  if (!head_only)
    out.append(body);
  return out;
}

}  // namespace

std::string answer(std::string_view head, const MetricsServer::Render &render) {
  const auto eol = head.find('\n');
  if (eol == std::string_view::npos)
    return head.size() >= kMaxRequestHead ? http_response(414, "", "", false) : "";
  // Request line: METHOD SP TARGET SP HTTP/1.x
  std::string_view line = head.substr(0, eol);
  if (!line.empty() && line.back() == '\r')
    line.remove_suffix(1);
  const auto sp1 = line.find(' ');
  const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.substr(sp2 + 1).rfind("HTTP/1.", 0) != 0)
    return http_response(400, "", "", false);
  const std::string_view method = line.substr(0, sp1);
  const bool head_only = method == "HEAD";
  if (method != "GET" && !head_only)
    return http_response(405, "", "", false);
  if (target_path(line.substr(sp1 + 1, sp2 - sp1 - 1)) != "/metrics")
    return http_response(404, "", "", head_only);
  // Until the empty line that ends the head (CRLF, or bare LF from lenient clients).
  if (head.find("\n\r\n") == std::string_view::npos && head.find("\n\n") == std::string_view::npos)
    return head.size() >= kMaxRequestHead ? http_response(431, "", "", false) : "";
  try {
    return http_response(200, "text/plain; version=0.0.4; charset=utf-8", render(), head_only);
  } catch (const std::bad_alloc &) {
    throw;
  } catch (const std::exception &e) {
    return http_response(500, "text/plain", std::string("netlatd: metrics unavailable: ") + e.what() + "\n",
                         head_only);
  }
}

}  // namespace netlatd::http
