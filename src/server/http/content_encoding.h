// tide::http content encoding — request bodies sent with `Content-Encoding: gzip` or `deflate`
// (tritonclient's request compression), inflated before any handler sees them.
//
// Contract:
//  - DecodeContentEncoding(coding, body, max_bytes): `coding` is the header's value (absent or
//    "identity": nothing to do). "gzip" / "x-gzip" and "deflate" (the zlib format of RFC 9110,
//    or raw deflate, which some clients send) replace *body with the inflated bytes.
//  - The inflated size is bounded by `max_bytes` (the server's max_body_bytes) while inflating:
//    a body that would inflate beyond it is kPayloadTooLarge (413) after at most max_bytes + one
//    chunk of output, so a zip bomb costs no more memory than the largest plain body.
//  - Errors: corrupt or truncated data -> kMalformedRequest (400); any other coding or a list
//    of codings ("gzip, br") -> kUnimplemented (501) naming what is accepted.
//  - Pure; thread-safe; never throws. *body is unchanged on error.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace tide::http {

absl::Status DecodeContentEncoding(std::string_view coding, std::string* body, size_t max_bytes);

}  // namespace tide::http
