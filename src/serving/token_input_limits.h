// tide::serving::TokenInputLimits — the integer values a model accepts in its token inputs, decided
// once at load, so that KServe token tensors can be checked before their rows are batched (a value
// the engine rejects fails the whole batch it travels in; see serving/tensor_rows.h).
//
// Contract:
//  - ReadEmbeddingRows parses an ONNX model file (external data is not read) and reports, for
//    input_ids and token_type_ids, the rows of the embedding table a Gather indexes with that input
//    (through Cast/Identity/Unsqueeze/Squeeze/Reshape of the input, and a table that is an
//    initializer, a Constant, or a DequantizeLinear/Cast/Identity of one; the smallest over several
//    Gathers). A value absent from the result was not derivable. Errors: NOT_FOUND (no file),
//    INVALID_ARGUMENT (not an ONNX model), UNIMPLEMENTED (tide built without libonnx-dev's
//    protobuf classes).
//  - ResolveTokenInputLimits decides the limits (pure; thread-safe):
//      input_ids:      0 <= id < vocab_size, the tokenizer's vocabulary, or the graph's table when
//                      that is smaller.
//      token_type_ids: 0 <= id < type_vocab_size. The token_type_vocab_size parameter when set
//                      (a value above the graph's table is kept, with a warning: such rows fail in
//                      the engine, alone); else the graph's table; else (not derivable) the ids the
//                      tokenizer itself produces for a pair (0, or 0 and 1), with a warning. A model
//                      without a token_type_ids input accepts 0 only (the tensor is not fed);
//                      setting the parameter for it is a FAILED_PRECONDITION error. A tokenizer
//                      that gives pairs a type the graph's table lacks is reported (warning).
//    `log` receives one line for the load log; `log_is_warning` says at which level.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/model_backend.h"
#include "tokenizer/tokenizer.h"

namespace onnx {
class ModelProto;
}

namespace tide::serving {

struct TokenInputLimits {
  int64_t vocab_size = 0;       // input_ids: 0 <= id < vocab_size
  int64_t type_vocab_size = 1;  // token_type_ids: 0 <= id < type_vocab_size
};

struct GraphEmbeddingRows {
  std::optional<int64_t> input_ids;
  std::optional<int64_t> token_type_ids;
};

absl::StatusOr<GraphEmbeddingRows> ReadEmbeddingRows(const std::string& model_path,
                                                     const ModelSignature& signature);
// The same from a model already parsed (onnx_graph::ReadModelFile).
GraphEmbeddingRows ReadEmbeddingRows(const onnx::ModelProto& model, const ModelSignature& signature);

struct ResolvedTokenInputLimits {
  TokenInputLimits limits;
  std::string log;
  bool log_is_warning = false;
};

// `graph`: ReadEmbeddingRows' answer (an error means nothing was derivable; its message is logged).
absl::StatusOr<ResolvedTokenInputLimits> ResolveTokenInputLimits(const ModelSignature& signature,
                                                                 const tokenizer::Tokenizer& tokenizer,
                                                                 const absl::StatusOr<GraphEmbeddingRows>& graph,
                                                                 std::optional<int64_t> token_type_vocab_size);

}  // namespace tide::serving
