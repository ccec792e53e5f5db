// tide::tokenizer::TruncationDirection — which end of an over-long input is cut. The one enum for
// the tokenizer's EncodeOptions, the HTTP API's "truncation_direction" (api::RerankRequest) and a
// model's `truncation_direction` parameter (config::TideParameters).
#pragma once

namespace tide::tokenizer {

enum class TruncationDirection { kRight, kLeft };

}  // namespace tide::tokenizer
