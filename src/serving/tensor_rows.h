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
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "api/kserve_infer.h"
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
};

absl::Status RowsFromTensors(const TensorRowsModel& model, const api::InferRequest& request,
                             std::vector<tokenizer::Encoding>* rows, Clock::duration* tokenize_time);

// The same for a loaded model (its signature, tokenizer, limits and max_sequence_length).
absl::Status RowsFromTensors(const ServedModel& model, const api::InferRequest& request,
                             std::vector<tokenizer::Encoding>* rows, Clock::duration* tokenize_time);

}  // namespace tide::serving
