// tide::api TEI predict wire format — `POST /predict` (text-embeddings-inference's sequence
// classification route; `@huggingface/inference`'s textClassification calls it).
//
// Request:  {"inputs": str | [str, str] | [str | [str, str], ...], "truncate"?: bool,
//            "truncation_direction"?: "Left" | "Right", "raw_scores": false}
//           As TEI reads it: a string is one input; an array of exactly two strings is ONE pair
//           (text, text_pair); any other array is a batch whose elements are strings or pairs.
// Response: one input: [{"score": f, "label": str}, ...]; a batch: [[...], ...] — every label of
//           the model per input, by score, highest first. Scores: softmax over the labels (a
//           single-label model: sigmoid) unless raw_scores, then the logits.
//
// Contract:
//  - Pure functions, thread-safe, never throw.
//  - Parse errors: JSON syntax -> kInvalidArgument (400); empty inputs -> kEmpty (400, TEI's
//    Empty); a wrong type, an element that is neither a string nor a pair of strings, more than
//    max_documents inputs, a text over max_text_chars, a bad truncation_direction ->
//    kFailedPrecondition (422). Unknown fields are ignored; null means "not given".
//  - RenderPredictResponse: kInternal when logits.size() != inputs x labels.size().
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/request_limits.h"
#include "domain/truncation_direction.h"

namespace tide::api {

struct PredictInput {
  std::string text;
  std::optional<std::string> text_pair;
};

struct PredictRequest {
  std::vector<PredictInput> inputs;  // never empty after a successful parse
  bool batch = false;                // the response is a list of lists
  std::optional<bool> truncate;      // unset: the server's default (tide truncates)
  std::optional<tokenizer::TruncationDirection> truncation_direction;
  bool raw_scores = false;
  // A decoder-only reranker's instruction for its pairs (see api/rerank.h).
  std::optional<std::string> instruction;
};

absl::StatusOr<PredictRequest> ParsePredictRequest(std::string_view body, const RequestLimits& limits = {});

struct LabelScore {
  std::string label;
  float score = 0;
};
// Per input, every label with its score (softmax over the labels, sigmoid for a single label, the
// logits with raw_scores), highest first, ties in label order. logits: [inputs, labels] row-major.
// kInternal when logits.size() != inputs x labels.size() or a score is not finite.
absl::StatusOr<std::vector<std::vector<LabelScore>>> PredictScores(size_t inputs, bool raw_scores,
                                                                   std::span<const float> logits,
                                                                   std::span<const std::string> labels);

// logits: [inputs, labels] row-major.
absl::StatusOr<std::string> RenderPredictResponse(const PredictRequest& request, std::span<const float> logits,
                                                  std::span<const std::string> labels);

}  // namespace tide::api
