// tide::quantize::ConvertFp16 — float16 weights for an ONNX model, with casts where needed.
//
// Contract:
//  - Mode kMatMul (for GPU providers): every selected MatMul/Gemm with a constant float32 weight
//    computes in float16: its weight (and Gemm bias) become float16 initializers, a Cast to
//    float16 goes before the activation input and a Cast back to float32 after the output, so
//    the rest of the graph (embeddings, LayerNorm, Softmax, the head) is untouched and the
//    model's inputs and outputs keep their types. This is for GPU providers: ONNX Runtime 1.29's
//    CPU provider runs it, but without a native float16 GEMM on AVX2 it is slower than FP32
//    (about 0.5x, bench/quantize/results.md).
//  - Mode kWeightsOnly: selected weights are stored as float16 and cast to float32 once at the
//    start of the graph (ONNX Runtime folds the cast at load): half the file size, FP32 compute,
//    runs on any provider.
//  - Selection and errors as QuantizeInt8 (include/exclude patterns on node or weight names;
//    FAILED_PRECONDITION for quantized or float16 models or nothing to convert); INVALID_ARGUMENT
//    for malformed weights and for a finite weight beyond float16's range (|w| > 65504), which
//    would otherwise become infinity.
//  - Pure function of its inputs; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"
#include "quantize/int8_quantizer.h"

namespace tide::quantize {

enum class Fp16Mode { kMatMul, kWeightsOnly };

struct Fp16Options {
  Fp16Mode mode = Fp16Mode::kMatMul;
  std::vector<std::string> include_patterns = {};                             // empty: every node
  std::vector<std::string> exclude_patterns = {"classifier", "pooler", "score"};  // the head stays FP32
};

absl::StatusOr<QuantizeReport> ConvertFp16(const Fp16Options& options, onnx::ModelProto* model);

}  // namespace tide::quantize
