// tide::http browser checks — the pure parts of tide's protection against web pages that drive a
// server through a visitor's browser: the Host allowlist (DNS rebinding), the Origin comparison
// (cross-site requests) and the JSON media type check (a browser must preflight a request with
// Content-Type: application/json, which tide answers only when --cors-allow-origin allows it).
//
// Contract: pure functions over header values; thread-safe; never allocate more than their result.
// Host and Origin hostnames compare ASCII-case-insensitively; ports compare as numbers, a missing
// port being the scheme's default (http 80, https 443).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tide::http {

// The host of a Host header value (`name`, `name:port`, `[v6]`, `[v6]:port`), without port or
// brackets, lower-cased; nullopt when the value is not of that form.
std::optional<std::string> HostOfHostHeader(std::string_view host_header);

// Whether `host_header` names one of `allowed` (host names or IP literals, without port; "*" allows
// any). An empty list allows any host; a malformed Host header is not allowed by a non-empty
// list; an absent one (empty: HTTP/1.0 only, which no browser sends without Host) is.
bool HostAllowed(std::string_view host_header, std::span<const std::string> allowed);

// Whether the Origin header value `origin` is the origin of this request itself: its host and port
// are those of the Host header (Host without port: the Origin scheme's default port). "null" and
// malformed origins are never the same origin.
bool SameOrigin(std::string_view origin, std::string_view host_header);

// Whether `origin` is in `allowed` (exact, ASCII-case-insensitive; "*" matches any origin).
bool OriginListed(std::string_view origin, std::span<const std::string> allowed);

// Whether `origin` is a valid --cors-allow-origin entry: "*" or scheme://host[:port] with scheme
// http or https and nothing after the port (what browsers send in Origin).
bool IsOriginPattern(std::string_view origin);

// Whether `host` is a valid --allowed-hosts entry: "*", a host name, an IPv4 literal or a
// bracketed IPv6 literal, without port.
bool IsHostPattern(std::string_view host);

// Whether a Content-Type value's media type is application/json (parameters such as charset are
// ignored; case-insensitive).
bool IsJsonMediaType(std::string_view content_type);

// The default --allowed-hosts of a server bound to `bind_host`: for a loopback bind (127.0.0.0/8,
// ::1, localhost) the names that reach it on this machine (localhost, the bind address, 127.0.0.1,
// ::1); for any other bind address an empty list (any host: a server reachable from other machines
// is addressed by names tide cannot know).
std::vector<std::string> DefaultAllowedHosts(std::string_view bind_host);

}  // namespace tide::http
