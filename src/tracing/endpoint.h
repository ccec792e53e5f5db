// tide::tracing Endpoint: an OTLP endpoint URL taken apart ("http://host:port/path").
//
// Contract:
//  - ParseEndpoint accepts http://host[:port][/path] (host a name, IPv4, or [IPv6]); the port
//    defaults to 80; path "" when absent. https:// is refused ("https is not supported yet"), as
//    is any other scheme, a missing host, a bad port, or a query/fragment; the error names the URL.
//  - authority() is "host:port" (IPv6 in brackets), what gRPC and the HTTP Host header want.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tide::tracing {

struct Endpoint {
  std::string host;  // without brackets
  uint16_t port = 80;
  std::string path;  // "" or starting with '/'
  std::string authority() const;
};

absl::StatusOr<Endpoint> ParseEndpoint(std::string_view url);

}  // namespace tide::tracing
