// tide::api TEI tokenize wire format — `POST /tokenize`.
//
// Request:  {"inputs": str | [str | [str, str], ...], "add_special_tokens": true}
//           A bare string is a batch of one; an element that is a two-string array is a
//           (text, text_pair) pair, as for a cross-encoder.
// Response: [[{"id": int, "text": str, "special": bool, "start"?: int, "stop"?: int}, ...], ...]
//           one list per input, in request order; start/stop (byte offsets into the input) only
//           when the tokenizer tracked offsets.
//
// Contract:
//  - Pure functions, thread-safe, never throw.
//  - Parse errors: JSON syntax -> kInvalidArgument (400); missing/empty inputs, an element that
//    is neither a string nor a pair of strings, more than max_documents inputs, a text over
//    max_text_chars, JSON deeper than max_json_depth, wrong types -> kFailedPrecondition (422).
//    Unknown fields are ignored; null means "not given".
//  - Token strings supplied by the serving layer may contain invalid UTF-8 (byte-level BPE
//    pieces); the renderer replaces such bytes with U+FFFD instead of failing.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/request_limits.h"

namespace tide::api {

struct TokenizeInput {
  std::string text;
  std::optional<std::string> text_pair;  // set for a [text, text_pair] element
};

struct TokenizeRequest {
  std::vector<TokenizeInput> inputs;  // never empty after a successful parse
  bool add_special_tokens = true;
  // A decoder-only reranker's instruction for its [query, document] pairs (see api/rerank.h).
  std::optional<std::string> instruction;
};

// One token of a tokenize response.
struct TokenInfo {
  int64_t id = 0;
  std::string text;      // the token's string form (vocabulary piece)
  bool special = false;  // [CLS], [SEP], <s>, padding...
  std::optional<size_t> start;  // byte offsets into the input, when tracked
  std::optional<size_t> stop;
};

absl::StatusOr<TokenizeRequest> ParseTokenizeRequest(std::string_view body,
                                                     const RequestLimits& limits = {});

// tokens[i] holds the tokens of request.inputs[i].
std::string RenderTokenizeResponse(std::span<const std::vector<TokenInfo>> tokens);

}  // namespace tide::api
