// tide::http::Router — a Handler that dispatches on (method, path pattern).
//
// Contract:
//  - Patterns are absolute paths whose segments are literals or `{name}` placeholders that match
//    exactly one non-empty segment: "/v2/models/{model}/versions/{version}/infer". Parameters are
//    percent-decoded; literals are compared with the raw (not decoded) path.
//  - When several patterns match, the one with more literal segments wins (so
//    "/v2/models/stats" beats "/v2/models/{model}"); ties go to the first added.
//  - HEAD is served by the GET route of a path when no HEAD route matches (the server then sends
//    the GET response's status and headers without its body); Allow lists HEAD wherever GET is.
//  - Unknown path: 404 {"error":"no route for GET /x","error_type":"not_found"}. Known path,
//    other method: 405 ("validation") with an `Allow` header listing the methods registered for
//    that path. The method and path are quoted at most kMaxEchoedBytes each (common/error_echo.h).
//  - Thread safety: Add() before the server starts; Handle() is then safe from any number of threads.
//    Route callbacks run on the I/O thread that called Handle() and must not block for long.
//  - Errors: Add() returns INVALID_ARGUMENT for a malformed pattern or method, ALREADY_EXISTS for a
//    (method, pattern) pair added twice.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/http/http_server.h"

namespace tide::http {

// The `{name}` values of a matched route, percent-decoded.
class PathParams {
 public:
  // The value of `name`, or "" when the pattern has no such parameter.
  std::string_view Get(std::string_view name) const;
  const std::vector<std::pair<std::string, std::string>>& all() const { return params_; }
  void Add(std::string name, std::string value) { params_.emplace_back(std::move(name), std::move(value)); }

 private:
  std::vector<std::pair<std::string, std::string>> params_;
};

using RouteHandler = std::function<void(Request, PathParams, Responder)>;

class Router final : public Handler {
 public:
  absl::Status Add(std::string_view method, std::string_view pattern, RouteHandler handler);
  void Handle(Request request, Responder respond) override;

 private:
  struct Segment {
    bool is_param = false;
    std::string text;  // the literal, or the parameter name
  };
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<Segment> segments;
    int literal_count = 0;
    RouteHandler handler;
  };
  static bool Match(const Route& route, const std::vector<std::string_view>& path_segments,
                    PathParams* params);

  std::vector<Route> routes_;
};

// Percent-decodes `text` ("%2F" -> "/"); '+' is kept as is. Malformed escapes are kept verbatim.
std::string PercentDecode(std::string_view text);

}  // namespace tide::http
