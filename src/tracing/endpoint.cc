#include "tracing/endpoint.h"

#include "common/absl_view.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tide::tracing {
namespace {

using common::AbslView;

}  // namespace

std::string Endpoint::authority() const {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<Endpoint> ParseEndpoint(std::string_view url) {
  std::string_view rest = url;
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("endpoint \"", AbslView(url), "\": ", AbslView(why)));
  };
  if (absl::StartsWithIgnoreCase(AbslView(rest), "https://")) return bad("https is not supported yet; use http://");
  if (!absl::StartsWithIgnoreCase(AbslView(rest), "http://")) return bad("must start with http://");
  rest.remove_prefix(7);
  if (rest.find_first_of("?#") != std::string_view::npos) return bad("must not have a query or fragment");
  Endpoint out;
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) out.path = std::string(rest.substr(slash));
  if (out.path == "/") out.path.clear();
  std::string_view port_text;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unclosed [ in the host");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("unexpected text after the host");
      port_text = after.substr(1);
      has_port = true;
    }
  } else {
    const size_t colon = authority.rfind(':');
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      has_port = true;
      authority = authority.substr(0, colon);
    }
    out.host = std::string(authority);
  }
  if (out.host.empty()) return bad("has no host");
  if (out.host.find_first_of(" @") != std::string::npos) return bad("bad host");
  if (has_port) {
    uint32_t port = 0;
    if (!absl::SimpleAtoi(AbslView(port_text), &port) || port == 0 || port > 65535) return bad("bad port");
    out.port = static_cast<uint16_t>(port);
  }
  return out;
}

}  // namespace tide::tracing
