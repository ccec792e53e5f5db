// tide::http response serialization — the bytes of one HTTP/1.x response on the wire.
//
// Contract:
//  - Pure; thread-safe; never throws.
//  - The server owns framing: the status line (reason phrase of the status, "Unknown" for one
//    without), `Server: tide`, Content-Length (none for 204 and 304), and the Connection header
//    (`Connection: close` on HTTP/1.1 when the connection ends after it, `Connection: keep-alive`
//    on HTTP/1.0 when it stays open). Handler headers named Content-Length, Transfer-Encoding,
//    Connection or Server are ignored, so are headers whose name is not an RFC 9110 token, and
//    control characters (CR, LF, NUL, DEL, ...) are dropped from header values and content_type.
//  - A status outside 200..599 (a 1xx would leave the client waiting for another response) is
//    answered as a 500 server error naming it.
//  - A HEAD response carries the status and headers, with the Content-Length of the body, and no
//    body.
#pragma once

#include <string>
#include <string_view>

#include "server/http/http_message.h"

namespace tide::http {

// How the response is framed: the request's HTTP version, whether the connection stays open
// after it, and whether it answers a HEAD request.
struct ResponseFraming {
  int version = 11;  // 10: an HTTP/1.0 status line; anything else: HTTP/1.1
  bool keep_alive = true;
  bool head_request = false;
};

// The wire form of `response`.
std::string SerializeResponse(const Response& response, const ResponseFraming& framing);

// The interim answer to `Expect: 100-continue`.
inline constexpr std::string_view kContinueResponse = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace tide::http
