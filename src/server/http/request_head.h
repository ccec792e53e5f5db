// tide::http request-head validation — whether a request whose headers are in may be served, and
// the origin form of its target.
//
// Contract:
//  - Pure; thread-safe; never throws. Decided from the request line's version and the header
//    fields alone, before any body byte is read, so that a body whose length the server and a
//    proxy in front of it could disagree on is never parsed as the next request (request
//    smuggling, RFC 9112 §6.1, §6.3). Every refusal closes the connection after its answer.
//  - Refused with kMalformedRequest (400): a Transfer-Encoding whose final coding is not `chunked`,
//    `chunked` applied twice, any Transfer-Encoding on HTTP/1.0, Transfer-Encoding together with
//    Content-Length, more than one Content-Length field or a list value, an HTTP/1.1 request
//    without Host, more than one Host field, an invalid Host value (RFC 9112 §3.2).
//  - Refused with kUnimplemented (501): a Transfer-Encoding other than a lone `chunked` (gzip,
//    deflate, ..., then chunked).
//  - Field names compare case-insensitively; several Transfer-Encoding fields are one list.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace tide::http {

// A request the server refuses once its headers are in: the kind (its status) and the message.
struct HeadError {
  ErrorKind kind = ErrorKind::kMalformedRequest;
  std::string message;
};

// Takes a request head's fields one at a time (no copy of the values is kept past Finish).
class RequestHeadCheck {
 public:
  void AddField(std::string_view name, std::string_view value);
  // Why the request with HTTP `version` (10, 11) and the fields added must not be served, or
  // nullopt when it may be.
  std::optional<HeadError> Finish(int version) const;

 private:
  int hosts_ = 0;
  int content_lengths_ = 0;
  bool content_length_list_ = false;
  bool transfer_encoding_ = false;
  std::string_view host_;
  std::vector<std::string_view> codings_;  // of every Transfer-Encoding field line, in order
};

struct HeaderField {
  std::string_view name;
  std::string_view value;
};

// RequestHeadCheck over a whole field list.
std::optional<HeadError> CheckRequestHead(int version, std::initializer_list<HeaderField> fields);

// The origin form of a request-target: an absolute-form "http://host:port/p?q" becomes "/p?q"
// (RFC 9112 §3.2.2; "http://host" becomes "/"); any other target is returned as sent. The
// authority is not compared with Host: tide serves every authority alike.
std::string OriginForm(std::string_view target);

}  // namespace tide::http
