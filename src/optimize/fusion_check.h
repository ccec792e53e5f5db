// tide::optimize::PrepareFusedModel — load-time graph fusion with a safety check.
//
// Contract:
//  - Reads the model at options.model_path, or the skeleton in options.model_data whose weights
//    options.shared_weights has adopted (runtime::SharedWeights::TakeFromFile: the loader's way,
//    so that no step of the load holds the whole model), fuses it (transformer_fusion.h, with
//    `fusion`; FusionOptions::tide_attention for tide's attention kernel) and, when anything
//    was fused, runs `probe` through an ONNX Runtime session of the fused model and one of the
//    original, with `options`' session settings. The fused model is accepted only when every
//    logit agrees within tolerance = 1e-3 * max(1, max |original logit|), or 2e-2 * that scale
//    for dynamically quantized (INT8) models, whose per-batch activation quantization turns
//    float-rounding differences into whole quantization steps. A wrong rewrite (mask, scale,
//    heads, bias) moves logits by a large fraction of their scale.
//  - Never fails: any reason not to serve the fused model (unreadable file, external data, nothing
//    matched, session or run error, mismatch) comes back as fused = false with `reason` set, and the
//    caller serves the original file as before.
//  - With `spill_dir` set, the fused model is serialized straight into an unnamed file there
//    (runtime/unlinked_file.h; `file`), which the probe session and later the caller open by path:
//    it is never held in memory whole. When that file cannot be written (no O_TMPFILE, disk full)
//    it is serialized into `model_data` instead and `spill_error` says why; with `spill_dir`
//    empty, always into `model_data`.
//  - Memory: from a skeleton, every session (original and fused) reads the one copy of the
//    weights in the skeleton's entry, and the fused entry reuses those bytes for every weight the
//    rewrite kept (SharedWeights::TakeFromModel with a base): the load holds the weights once,
//    in the entry's file. From a file, the original is parsed as a stream (never its bytes beside
//    the parse). With options.shared_weights the fused model's weights move into one shared entry
//    (`weights`) and only the graph's skeleton is serialized; the fused probe session takes its weights from that
//    entry, as the instances will. The original's probe session opens first and alone, without a
//    pre-packed copy of its weights and without ONNX Runtime's graph rewrites (the reference is the
//    graph as written). The load-time peak is one such session of the original model, or one
//    parse, not the sum of every copy (bench/memory/load_timeline.py shows the phases).
//  - Blocks for parsing and fusing twice (the first parse is dropped before the original's session
//    opens), two session creations and two runs; thread-compatible.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "optimize/transformer_fusion.h"
#include "runtime/model_backend.h"
#include "runtime/ort_backend.h"
#include "runtime/shared_weights.h"
#include "runtime/unlinked_file.h"

namespace tide::optimize {

struct FusedModel {
  bool fused = false;       // true: serve `file` (or model_data) instead of the original file
  std::unique_ptr<runtime::UnlinkedFile> file;  // the fused model, with spill_dir (see the contract)
  std::string model_data;   // the fused model, serialized, when `file` is null
  // With options.shared_weights: the fused model's weights, taken out of it before it was
  // serialized (runtime::SharedWeights::TakeFromModel), so `file` / model_data is a skeleton that
  // only sessions given these weights can open; adopted by options.shared_weights under the
  // fused model's path. The caller holds it as long as it serves the fused model.
  std::shared_ptr<runtime::SharedModelWeights> weights;
  std::string spill_error;  // why the fused model is in model_data although spill_dir was given
  FusionReport report;
  double max_abs_diff = 0;  // fused vs original logits on the probe batch
  double tolerance = 0;
  std::string reason;       // why the original is served (fused == false)
  bool check_failed = false;  // the fused model failed or disagreed on the probe (an error to log)
};

FusedModel PrepareFusedModel(const runtime::OrtOptions& options, const runtime::TokenBatch& probe,
                             const std::string& spill_dir = "", const FusionOptions& fusion = {});

// A padded probe batch for `signature`: 3 rows of lengths seq, ~2/3 seq and 3 (seq = min(24,
// max_sequence_length)), token ids drawn deterministically from [1, min(vocab_size, 30000)),
// token_type_ids zero (every BERT-like model has type 0).
runtime::TokenBatch ProbeBatch(const ModelSignature& signature, int64_t vocab_size,
                               int64_t max_sequence_length);

// Runs `batch` through the model given by `options`; the logits, or the backend's error.
absl::StatusOr<runtime::Logits> RunOnce(const runtime::OrtOptions& options, const runtime::TokenBatch& batch);

// True when the model re-quantizes activations at run time (tide quantize --int8 output).
bool IsDynamicallyQuantized(const onnx::ModelProto& model);

struct ProbeComparison {
  double max_abs_diff = 0;  // over every logit of the probe batch (NaN counts as infinite)
  double tolerance = 0;     // see PrepareFusedModel
  bool ok() const { return max_abs_diff <= tolerance; }
};

// Runs `probe` through both models. Errors: the failing model's status, prefixed with which one.
absl::StatusOr<ProbeComparison> CompareOnProbe(const runtime::OrtOptions& original, const runtime::OrtOptions& fused,
                                               const runtime::TokenBatch& probe, bool quantized);

}  // namespace tide::optimize
