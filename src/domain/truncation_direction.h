// tide::TruncationDirection — which end of an over-long input is cut. The one enum for the
// tokenizer's EncodeOptions, the HTTP API's "truncation_direction" (api::RerankRequest) and a
// model's `truncation_direction` parameter (config::TideParameters). Header-only.
#pragma once

namespace tide {

enum class TruncationDirection { kRight, kLeft };

}  // namespace tide

namespace tide::tokenizer {
using ::tide::TruncationDirection;  // the tokenizer's EncodeOptions speak it as tokenizer::
}  // namespace tide::tokenizer
