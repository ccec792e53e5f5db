// tide::serving::RowsFromTensors — a KServe v2 inference request's inputs as the rows the batcher
// runs: token tensors (input_ids [+ attention_mask, token_type_ids]) checked against what the model
// accepts, or BYTES text (text [+ text_pair]) that the model's tokenizer encodes.
//
// Contract:
//  - Every integer a token tensor carries is checked here, because a value the engine rejects
//    would fail the whole batch its row travels in (other clients' rows included):
//      input_ids       0 <= id < limits.vocab_size
//      token_type_ids  0 <= id < limits.type_vocab_size (serving/token_input_limits.h)
//      attention_mask  0 or 1, and every row attends to at least one token
//    plus: INT64 or INT32, rank 2 [batch, sequence], every tensor the shape of input_ids, as many
//    elements as the shape says, batch and sequence >= 1, sequence <= max_sequence_length; no
//    unknown input names; token tensors and text not mixed.
//  - Errors are FAILED_PRECONDITION (422) naming the field, and for a value its [row][position]
//    and the accepted range. `rows` is unspecified after an error.
//  - Thread-safe (reads the model's immutable parts only). `tokenize_time` is set for text
//    inputs only.
//  - Long documents on text inputs (KServe `parameters.long_documents`, LongDocumentsParameter):
//    with chunk_max / chunk_mean, each (text, text_pair) row is a (query, document) pair whose
//    document is split as a rerank's is (serving/long_documents.h: the model's chunk_tokens,
//    chunk_stride, max_chunks_per_document), every window one row; `windows` records which input
//    each row belongs to. FoldWindowRows then folds the rows' raw logits back into one row per
//    input, per label: their max (chunk_max) or mean (chunk_mean), the same as /rerank with
//    raw_scores. `requested` (the request's parameter) needs text and text_pair (422 for token
//    tensors or text alone: nothing says which part is the document); without it the model's
//    `long_documents` parameter applies to text + text_pair inputs only. truncate leaves every
//    row as it is.
//  - A model with a prompt_template (decoder-only rerankers) encodes each (text, text_pair) row as
//    its prompt (serving/scoring.h), with the request's `parameters.instruction` (a string; unset:
//    the model's default_instruction; 422 naming it for a model that takes none).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/kserve_infer.h"
#include "domain/long_documents_mode.h"
#include "serving/inference_request.h"
#include "common/clock.h"
#include "runtime/model_backend.h"
#include "serving/token_input_limits.h"
#include "tokenizer/tokenizer.h"

namespace tide::serving {

class ServedModel;

// What the conversion needs to know about a model.
struct TensorRowsModel {
  std::string_view name;
  const ModelSignature* signature = nullptr;  // required
  const tokenizer::Tokenizer* tokenizer = nullptr;     // for text inputs; null: text is refused
  TokenInputLimits limits;
  size_t max_sequence_length = 512;
  // Set (a model with a prompt_template): encodes a (text, text_pair) row as the model's prompt.
  std::function<absl::Status(std::string_view text, std::string_view pair, tokenizer::Encoding* out)> encode_pair;
};

absl::Status RowsFromTensors(const TensorRowsModel& model, const api::InferRequest& request,
                             std::vector<tokenizer::Encoding>* rows, Clock::duration* tokenize_time);

// The same for a loaded model (its signature, tokenizer, limits and max_sequence_length).
absl::Status RowsFromTensors(const ServedModel& model, const api::InferRequest& request,
                             std::vector<tokenizer::Encoding>* rows, Clock::duration* tokenize_time);

// `parameters.long_documents` of a KServe request: nullopt when absent; 422 when it is not
// "truncate", "chunk_max" or "chunk_mean".
absl::StatusOr<std::optional<LongDocuments>> LongDocumentsParameter(const api::Parameters& parameters);

// Which input each row belongs to, when long documents were split into windows.
struct TensorWindows {
  LongDocuments mode = LongDocuments::kTruncate;
  std::vector<size_t> owner;  // owner[row]: its input; empty when nothing was split
  size_t inputs = 0;
  bool split() const { return !owner.empty(); }
};

// RowsFromTensors with long documents; `windows` tells FoldWindowRows how to fold.
absl::Status RowsFromTensors(const ServedModel& model, const api::InferRequest& request,
                             std::optional<LongDocuments> requested,
                             std::vector<tokenizer::Encoding>* rows, TensorWindows* windows,
                             Clock::duration* tokenize_time);

// One row of logits per input again (max or mean per label over its windows); real_tokens and
// timings stay those of every window. Nothing when nothing was split.
void FoldWindowRows(const TensorWindows& windows, InferenceResult* result);

}  // namespace tide::serving
