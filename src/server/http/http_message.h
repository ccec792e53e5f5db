// tide::http::Request and Response — one HTTP request as the server hands it to a Handler, and
// the response a Handler gives back.
//
// Contract:
//  - Plain values, no I/O; copyable and movable. Request::header() is pure.
//  - The server fills every field of a Request it builds (client_gone is never null then).
//  - A Response is what a Handler says; the server owns its framing (response_serializer.h):
//    Content-Length, Connection, Transfer-Encoding and Server are the server's, control characters
//    are dropped from header values, and a status outside 200..599 is answered as 500.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/cancellation_flag.h"

namespace tide::http {

struct Request {
  std::string method;                 // "GET", "POST", ... as sent
  std::string target;                 // origin-form request-target: "/v1/rerank?x=1" (an
                                      // absolute-form target reduced to its path and query)
  std::string path;                   // target before '?', not percent-decoded
  std::string query;                  // target after '?', without it; "" if none
  int version = 11;                   // 10 for HTTP/1.0, 11 for HTTP/1.1
  std::vector<std::pair<std::string, std::string>> headers;  // in arrival order
  std::string body;                   // de-chunked
  std::shared_ptr<CancellationFlag> client_gone;  // never null when built by the server
  std::chrono::steady_clock::time_point received_at;  // first byte of the request arrived
  std::string remote_address;         // "ip:port"

  // First value of the header `name` (case-insensitive), or "" when absent.
  std::string_view header(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";  // empty: no Content-Type header
  // Extra headers. Control characters (CR, LF, NUL, ...) are dropped from values and from
  // content_type; a header whose name is not an RFC 9110 token is not sent.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

}  // namespace tide::http
