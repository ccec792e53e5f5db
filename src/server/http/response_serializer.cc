#include "server/http/response_serializer.h"

#include <boost/beast/http/status.hpp>

#include "absl/strings/str_cat.h"
#include "common/ascii.h"
#include "server/http/error_response.h"

namespace tide::http {
namespace {

namespace bhttp = boost::beast::http;

// A header field value as RFC 9110 allows it: control characters (CR and LF included, which would
// split the header; NUL, DEL, ...) are dropped, horizontal tab and obs-text bytes are kept.
void AppendSanitized(std::string_view text, std::string* out) {
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u >= 0x20 && u != 0x7f) || c == '\t') out->push_back(c);
  }
}

// RFC 9110 token: a header field name.
bool IsToken(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    const unsigned char u = static_cast<unsigned char>(c);
    const bool alnum = (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z');
    if (!alnum && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) return false;
  }
  return true;
}

bool IsFramingHeader(std::string_view name) {
  return AsciiEqualsIgnoreCase(name, "content-length") || AsciiEqualsIgnoreCase(name, "connection") ||
         AsciiEqualsIgnoreCase(name, "transfer-encoding") || AsciiEqualsIgnoreCase(name, "server");
}

}  // namespace

std::string SerializeResponse(const Response& original, const ResponseFraming& framing) {
  const bool valid_status = original.status >= 200 && original.status <= 599;
  const Response replacement =
      valid_status ? Response{}
                   : ServerErrorResponse(ErrorKind::kInternal,
                                         absl::StrCat("internal: handler answered status ", original.status));
  const Response& response = valid_status ? original : replacement;
  const int status = response.status;
  const bhttp::status known = bhttp::int_to_status(static_cast<unsigned>(status));
  const boost::beast::string_view reason_text = bhttp::obsolete_reason(known);
  const std::string_view reason = known == bhttp::status::unknown
                                      ? std::string_view("Unknown")
                                      : std::string_view(reason_text.data(), reason_text.size());
  const bool no_body = status == 204 || status == 304;
  std::string out;
  out.reserve(160 + response.body.size());
  absl::StrAppend(&out, framing.version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ", status, " ");
  out.append(reason);
  out.append("\r\nServer: tide\r\n");
  if (!response.content_type.empty()) {
    out.append("Content-Type: ");
    AppendSanitized(response.content_type, &out);
    out.append("\r\n");
  }
  for (const auto& [name, value] : response.headers) {
    if (!IsToken(name) || IsFramingHeader(name)) continue;
    out.append(name);
    out.append(": ");
    AppendSanitized(value, &out);
    out.append("\r\n");
  }
  if (!no_body) absl::StrAppend(&out, "Content-Length: ", response.body.size(), "\r\n");
  if (framing.version == 10 && framing.keep_alive) out.append("Connection: keep-alive\r\n");
  if (framing.version != 10 && !framing.keep_alive) out.append("Connection: close\r\n");
  out.append("\r\n");
  if (!no_body && !framing.head_request) out.append(response.body);
  return out;
}

}  // namespace tide::http
