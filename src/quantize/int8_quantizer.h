// tide::quantize::QuantizeInt8 — dynamic INT8 quantization of an ONNX model's weight MatMuls.
//
// Contract:
//  - Rewrites, in place, every selected MatMul whose second input is a constant float32 2-D
//    initializer [K, N], and every selected Gemm (transA = 0) with such a weight, into integer
//    matrix multiplication: weights become symmetric int8 (zero point 0, scale max|w| / 127, one
//    scale for the tensor or one per output column), activations are quantized to uint8 at run
//    time (dynamic range). Everything else — embeddings (Gather), LayerNormalization, Softmax,
//    the attention score MatMuls (no constant weight) — stays float32. Selected MatMuls that read one
//    activation may share its quantization (Int8Options::share_input_quantization). Bias Adds after a MatMul
//    stay separate nodes so ONNX Runtime can still fuse them; a Gemm's bias becomes such an Add.
//  - Selection: a node is quantized when its name or its weight's name matches an include
//    pattern (all nodes when there are none) and matches no exclude pattern. The default
//    excludes the classifier head ("classifier", "pooler", "score" in either name).
//  - Errors: FAILED_PRECONDITION for an already quantized (or float16) model and for a model with
//    nothing to quantize; INVALID_ARGUMENT for malformed weights, bad patterns, or an opset too old
//    for the requested operator format. On error the model may be partly rewritten: discard it.
//  - Pure function of its inputs; thread-compatible (one model per call).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace tide::quantize {

enum class Int8OpFormat {
  // com.microsoft DynamicQuantizeMatMul (one fused kernel in ONNX Runtime's CPU provider).
  kDynamicQuantizeMatMul,
  // Standard ONNX only: DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul (opset >= 11);
  // portable to any ONNX runtime; ONNX Runtime fuses it back into DynamicQuantizeMatMul.
  kMatMulInteger,
};

struct Int8Options {
  bool per_channel = false;    // one weight scale per output column instead of one per tensor
  bool reduce_range = false;   // 7-bit weights [-63, 63]: avoids int16 saturation of u8s8 kernels on non-VNNI CPUs
  Int8OpFormat op_format = Int8OpFormat::kDynamicQuantizeMatMul;
  // kDynamicQuantizeMatMul only: MatMuls that read the same activation (an attention block's Q, K
  // and V projections) share one DynamicQuantizeLinear and each become com.microsoft
  // MatMulIntegerToFloat, instead of each quantizing that activation again. Same arithmetic.
  // Needs ONNX opset >= 11 (DynamicQuantizeLinear); older models keep one DynamicQuantizeMatMul each.
  // Off by default: no gain measured on MiniLM-L6 (CPU time 0.99x, bench/results/int8-profile.txt).
  bool share_input_quantization = false;
  bool quantize_gemm = true;   // Gemm nodes (Linear layers exported as Gemm) too, when selected
  std::vector<std::string> include_patterns = {};                             // empty: every node
  std::vector<std::string> exclude_patterns = {"classifier", "pooler", "score"};  // the head stays FP32
};

struct QuantizeReport {
  std::vector<std::string> converted_nodes;   // names of the nodes rewritten
  std::vector<std::string> skipped_nodes;     // "<name>: <why>" for candidates left alone
  int64_t weight_bytes_before = 0;            // initializer bytes of the whole model
  int64_t weight_bytes_after = 0;
};

absl::StatusOr<QuantizeReport> QuantizeInt8(const Int8Options& options, onnx::ModelProto* model);

}  // namespace tide::quantize
