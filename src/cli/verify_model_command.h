// `tide verify-model`: compare ONNX Runtime's logits for a model with reference logits (e.g. from
// PyTorch, written by the model export script).
//
//   tide verify-model --model PATH/model.onnx --reference ref.json [--atol 1e-4]
//
// ref.json: {"cases": [{"inputs": {"input_ids": [[...]], "attention_mask": [[...]],
//                                  "token_type_ids": [[...]]},       <- optional
//                       "logits": [[...]],
//                       "token_embeddings": [[[...]]]}, ...]}   <- optional: an embedder's
//                                                   token states [batch, seq, hidden], compared
//                                                   at the mask-1 positions when the model has them
// Each case is one batch (rows of equal length). Prints the max absolute difference per case and
// overall. Exit codes: 0 within atol, 1 above atol, 2 when the model or the reference cannot be
// used. Flags have environment twins TIDE_VERIFY_MODEL, TIDE_VERIFY_REFERENCE, TIDE_VERIFY_ATOL,
// TIDE_VERIFY_THREADS.
#pragma once

#include <ostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"

namespace tide::cli {

struct VerifyModelOptions {
  std::string model;       // .onnx file
  std::string reference;   // ref.json
  double atol = 1e-4;      // largest accepted |ort - reference|
  int intra_op_threads = 1;
};

// Runs every case; writes one line per case and a summary to `out`. Returns the overall max
// absolute difference; INVALID_ARGUMENT for a malformed reference, the backend's error otherwise.
absl::StatusOr<double> VerifyModel(const VerifyModelOptions& options, std::ostream& out);

void RegisterVerifyModelCommand(CLI::App* app);

}  // namespace tide::cli
