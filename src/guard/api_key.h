// tide::guard API key check — the optional shared secret on inference endpoints
// (`Authorization: Bearer <key>`, set with --api-key / TIDE_API_KEY).
//
// Contract:
//  - Pure functions, thread-safe, no allocation.
//  - ApiKeyMatches parses the header value as RFC 7235 credentials: the scheme "Bearer" (any case),
//    one or more spaces, then the token; surrounding spaces/tabs are ignored. Anything else
//    (missing header, other scheme, empty token) does not match. An empty expected_key never
//    matches: the edge decides whether a key is configured at all and skips the check if not.
//  - The token comparison is constant-time in the content: every byte of the expected key is
//    compared whatever the position of the first difference, so response timing reveals at most
//    the key's length, not a prefix of it.
#pragma once

#include <string_view>

namespace tide::guard {

bool ApiKeyMatches(std::string_view authorization_header, std::string_view expected_key);

// The token of `Bearer <token>` credentials (parsed as above); empty when there is none.
std::string_view BearerToken(std::string_view authorization_header);

// Constant-time equality: the time depends on expected.size() only, never on where
// `presented` and `expected` differ.
bool ConstantTimeEquals(std::string_view presented, std::string_view expected);

}  // namespace tide::guard
