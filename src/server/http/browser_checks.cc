#include "server/http/browser_checks.h"

#include <charconv>
#include <cstdint>

#include "common/ascii.h"

namespace tide::http {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = AsciiToLower(c);
  return out;
}

bool ParsePort(std::string_view text, int* port) {
  if (text.empty() || text.size() > 5) return false;
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < 0 || value > 65535) return false;
  *port = value;
  return true;
}

// `host[:port]` or `[v6][:port]` -> host (lower case, no brackets) and port (-1 when absent).
bool SplitHostPort(std::string_view authority, std::string* host, int* port) {
  *port = -1;
  if (authority.empty()) return false;
  if (authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    *host = Lower(authority.substr(1, close - 1));
    std::string_view rest = authority.substr(close + 1);
    if (rest.empty()) return true;
    return rest.front() == ':' && ParsePort(rest.substr(1), port);
  }
  const size_t colon = authority.rfind(':');
  std::string_view name = authority;
  if (colon != std::string_view::npos) {
    if (authority.find(':') != colon) return false;  // an IPv6 literal must be bracketed
    if (!ParsePort(authority.substr(colon + 1), port)) return false;
    name = authority.substr(0, colon);
  }
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '.' || c == '_';
    if (!ok) return false;
  }
  *host = Lower(name);
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<std::string> HostOfHostHeader(std::string_view host_header) {
  std::string host;
  int port = -1;
  if (!SplitHostPort(Trim(host_header), &host, &port)) return std::nullopt;
  return host;
}

bool HostAllowed(std::string_view host_header, std::span<const std::string> allowed) {
  if (allowed.empty()) return true;
  for (const std::string& a : allowed) {
    if (a == "*") return true;
  }
  // No Host at all: only HTTP/1.0 may omit it (the server refuses HTTP/1.1 without one), and no
  // browser does, so it cannot come from a rebinding page.
  if (host_header.empty()) return true;
  std::optional<std::string> host = HostOfHostHeader(host_header);
  if (!host.has_value()) return false;
  for (const std::string& a : allowed) {
    std::string_view name = a;
    if (name.size() >= 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
    if (AsciiEqualsIgnoreCase(name, *host)) return true;
  }
  return false;
}

bool SameOrigin(std::string_view origin, std::string_view host_header) {
  origin = Trim(origin);
  int default_port = 0;
  std::string_view rest;
  if (origin.size() > 7 && AsciiEqualsIgnoreCase(origin.substr(0, 7), "http://")) {
    default_port = 80;
    rest = origin.substr(7);
  } else if (origin.size() > 8 && AsciiEqualsIgnoreCase(origin.substr(0, 8), "https://")) {
    default_port = 443;
    rest = origin.substr(8);
  } else {
    return false;  // "null", other schemes, garbage
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);  // not in a browser's Origin, tolerated
  std::string origin_host, host;
  int origin_port = -1, host_port = -1;
  if (!SplitHostPort(rest, &origin_host, &origin_port)) return false;
  if (!SplitHostPort(Trim(host_header), &host, &host_port)) return false;
  if (origin_port < 0) origin_port = default_port;
  if (host_port < 0) host_port = default_port;
  return origin_host == host && origin_port == host_port;
}

bool OriginListed(std::string_view origin, std::span<const std::string> allowed) {
  origin = Trim(origin);
  for (const std::string& a : allowed) {
    if (a == "*" || AsciiEqualsIgnoreCase(a, origin)) return true;
  }
  return false;
}

bool IsOriginPattern(std::string_view origin) {
  if (origin == "*") return true;
  std::string_view rest;
  if (origin.size() > 7 && AsciiEqualsIgnoreCase(origin.substr(0, 7), "http://")) {
    rest = origin.substr(7);
  } else if (origin.size() > 8 && AsciiEqualsIgnoreCase(origin.substr(0, 8), "https://")) {
    rest = origin.substr(8);
  } else {
    return false;
  }
  std::string host;
  int port = -1;
  return SplitHostPort(rest, &host, &port);
}

bool IsHostPattern(std::string_view host) {
  if (host == "*") return true;
  std::string name;
  int port = -1;
  return SplitHostPort(host, &name, &port) && port < 0;
}

bool IsJsonMediaType(std::string_view content_type) {
  const size_t semicolon = content_type.find(';');
  return AsciiEqualsIgnoreCase(Trim(content_type.substr(0, semicolon)), "application/json");
}

std::vector<std::string> DefaultAllowedHosts(std::string_view bind_host) {
  std::string host(bind_host);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const bool loopback = host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
  if (!loopback) return {};
  std::vector<std::string> out = {"localhost", "127.0.0.1", "::1"};
  if (host != "localhost" && host != "127.0.0.1" && host != "::1") out.push_back(Lower(host));
  return out;
}

}  // namespace tide::http
