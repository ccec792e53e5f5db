// tide::onnx_graph helpers on ONNX graphs shared by quantize (INT8, FP16) and optimize (fusion).
//
// Contract: free functions on onnx protobuf messages; no shared state; thread-compatible.
// Errors are INVALID_ARGUMENT naming the tensor or node that is malformed.
#pragma once

#include <cstdint>
#include <regex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace tide::onnx_graph {

// A float initializer's values (from float_data or little-endian raw_data), checked against dims.
absl::StatusOr<std::vector<float>> ReadFloatTensor(const onnx::TensorProto& t);
int64_t NumElements(const onnx::TensorProto& t);
// Bytes per element of a dense numeric type (FLOAT 4, FLOAT16 2, INT64 8, ...); 0 for strings,
// 4-bit and complex types.
size_t ElementSize(int32_t data_type);
// The bytes a dense tensor's data holds by its dims and type; 0 when ElementSize is 0 or a dim is
// negative.
uint64_t DenseTensorBytes(const onnx::TensorProto& t);

// IEEE binary16 from binary32, rounding to nearest even (overflow -> inf, NaN kept).
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);

// OK, or FAILED_PRECONDITION naming the first node that shows the model is already quantized
// (QuantizeLinear, MatMulInteger, DynamicQuantizeMatMul, ...) or already converted to float16.
absl::Status CheckNotQuantized(const onnx::ModelProto& model);

// What the graph computes in, by the same signs: "int8" with a quantized node (what `tide quantize
// --int8` writes: DynamicQuantizeMatMul / MatMulInteger / DynamicQuantizeLinear, or QDQ pairs),
// else "fp16" with float16 weights (`tide quantize --fp16`), else "fp32".
std::string_view GraphPrecision(const onnx::ModelProto& model);

// FLOPs one token costs in the graph's weight products: 2 x the elements of every 2-D weight
// (an initializer, directly or through a Cast / DequantizeLinear of one) that a MatMul, Gemm,
// FusedMatMul, MatMulInteger, DynamicQuantizeMatMul, MatMulIntegerToFloat, Attention or QAttention
// of the main graph reads. Embedding lookups (Gather) and attention's length-squared work are left
// out. 0 when the graph has none (e.g. a skeleton whose weights carry no dims).
uint64_t WeightFlopsPerToken(const onnx::GraphProto& g);

// Names in use anywhere in the main graph (values, initializers, nodes), for fresh names.
class Namer {
 public:
  explicit Namer(const onnx::GraphProto& g);
  std::string Fresh(const std::string& base);  // base, or base_1, base_2, ... not yet used
 private:
  std::unordered_set<std::string> used_;
};

// Compiled include/exclude name patterns (ECMAScript regex, searched anywhere in the name).
class NodeFilter {
 public:
  static absl::StatusOr<NodeFilter> Create(const std::vector<std::string>& include,
                                           const std::vector<std::string>& exclude);
  // True when any of `names` (node name, weight name) matches an include pattern (or there are
  // none) and none matches an exclude pattern.
  bool Selected(const std::vector<std::string>& names) const;
 private:
  std::vector<std::regex> include_, exclude_;
};

// Adds to `reads` every value name the graph's nodes read (recursing into subgraphs, whose reads
// of outer values count) and the graph's outputs.
void CollectReads(const onnx::GraphProto& g, std::unordered_set<std::string>* reads);

// Removes initializers (and their graph.input entries, IR < 4) that no node of any graph reads
// any more and that are not graph outputs. Returns the number of bytes removed.
int64_t DropUnusedInitializers(onnx::GraphProto* g);

// Size of an initializer's data in bytes; of all the graph's initializers.
int64_t TensorBytes(const onnx::TensorProto& t);
int64_t InitializerBytes(const onnx::GraphProto& g);

// A node's name for messages: its name, or its first output's when it has none.
std::string NodeName(const onnx::NodeProto& n);

// A MatMul or Gemm whose second input is a constant float32 2-D initializer.
struct WeightMatMul {
  int node_index = 0;
  std::string weight;    // the initializer's name
  bool gemm = false;     // Gemm: the fields below apply
  bool trans_b = false;
  float alpha = 1.0f;
  float beta = 1.0f;
  std::string bias;      // Gemm's C input, or empty
};

// The main graph's weight MatMuls/Gemms. Gemms that cannot be rewritten as MatMul + Add (transA,
// non-constant B) are left out and described in `skipped` as "<name>: <why>".
std::vector<WeightMatMul> FindWeightMatMuls(const onnx::GraphProto& g, std::vector<std::string>* skipped);

// Adds (or raises) an opset import for `domain`.
void EnsureOpset(onnx::ModelProto* model, const std::string& domain, int64_t version);
int64_t OpsetVersion(const onnx::ModelProto& model, const std::string& domain);

}  // namespace tide::onnx_graph
