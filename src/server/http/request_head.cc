#include "server/http/request_head.h"

#include "absl/strings/str_cat.h"
#include "common/ascii.h"
#include "common/error_echo.h"

namespace tide::http {
namespace {

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 9110 §7.2 Host = uri-host [ ":" port ]: unreserved, sub-delims, pct-encoded, ':' and the
// brackets of an IP literal. Empty is allowed (a target without authority).
bool IsValidHost(std::string_view host) {
  for (char c : host) {
    const unsigned char u = static_cast<unsigned char>(c);
    const bool alnum = (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z');
    if (!alnum && std::string_view("-._~!$&'()*+,;=%:[]").find(c) == std::string_view::npos) return false;
  }
  return true;
}

}  // namespace

void RequestHeadCheck::AddField(std::string_view name, std::string_view value) {
  if (AsciiEqualsIgnoreCase(name, "host")) {
    ++hosts_;
    host_ = value;
  } else if (AsciiEqualsIgnoreCase(name, "content-length")) {
    ++content_lengths_;
    if (value.find(',') != std::string_view::npos) content_length_list_ = true;
  } else if (AsciiEqualsIgnoreCase(name, "transfer-encoding")) {
    transfer_encoding_ = true;
    std::string_view rest = value;
    for (;;) {
      const size_t comma = rest.find(',');
      const std::string_view coding = TrimOws(rest.substr(0, comma));
      if (!coding.empty()) codings_.push_back(coding);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
}

std::optional<HeadError> RequestHeadCheck::Finish(int version) const {
  if (transfer_encoding_) {
    if (content_lengths_ > 0) {
      return HeadError{ErrorKind::kMalformedRequest, "request has both Transfer-Encoding and Content-Length"};
    }
    if (version < 11) {
      return HeadError{ErrorKind::kMalformedRequest, "Transfer-Encoding is not allowed in an HTTP/1.0 request"};
    }
    if (codings_.empty() || !AsciiEqualsIgnoreCase(codings_.back(), "chunked")) {
      return HeadError{ErrorKind::kMalformedRequest,
                       absl::StrCat("request Transfer-Encoding must end with chunked, got '",
                                    EchoForError(codings_.empty() ? "" : codings_.back()), "'")};
    }
    for (size_t i = 0; i + 1 < codings_.size(); ++i) {
      if (AsciiEqualsIgnoreCase(codings_[i], "chunked")) {
        return HeadError{ErrorKind::kMalformedRequest, "request Transfer-Encoding applies chunked twice"};
      }
    }
    if (codings_.size() > 1) {
      return HeadError{ErrorKind::kUnimplemented,
                       absl::StrCat("transfer coding '", EchoForError(codings_.front()),
                                    "' is not supported; send Transfer-Encoding: chunked alone")};
    }
  }
  if (content_lengths_ > 1 || content_length_list_) {
    return HeadError{ErrorKind::kMalformedRequest, "request has more than one Content-Length"};
  }
  if (hosts_ > 1) return HeadError{ErrorKind::kMalformedRequest, "request has more than one Host header"};
  if (hosts_ == 0 && version >= 11) {
    return HeadError{ErrorKind::kMalformedRequest, "HTTP/1.1 request without a Host header"};
  }
  if (!IsValidHost(host_)) {
    return HeadError{ErrorKind::kMalformedRequest, absl::StrCat("invalid Host header '", EchoForError(host_), "'")};
  }
  return std::nullopt;
}

std::optional<HeadError> CheckRequestHead(int version, std::initializer_list<HeaderField> fields) {
  RequestHeadCheck check;
  for (const HeaderField& field : fields) check.AddField(field.name, field.value);
  return check.Finish(version);
}

std::string OriginForm(std::string_view target) {
  size_t scheme_end = 0;
  if (target.size() >= 7 && AsciiEqualsIgnoreCase(target.substr(0, 7), "http://")) {
    scheme_end = 7;
  } else if (target.size() >= 8 && AsciiEqualsIgnoreCase(target.substr(0, 8), "https://")) {
    scheme_end = 8;
  } else {
    return std::string(target);
  }
  const size_t path = target.find_first_of("/?", scheme_end);
  if (path == std::string_view::npos) return "/";
  if (target[path] == '?') return "/" + std::string(target.substr(path));
  return std::string(target.substr(path));
}

}  // namespace tide::http
