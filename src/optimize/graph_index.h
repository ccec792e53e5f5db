// tide::optimize::GraphIndex — a read-only view of an ONNX main graph for pattern matching:
// who produces and who reads each value, and which values are constants.
//
// Contract:
//  - Built from a GraphProto and valid only while that graph is not modified (it keeps pointers
//    into it); rebuild it after every rewrite. Thread-compatible.
//  - A value is constant when it is an initializer, the output of a Constant node (value,
//    value_float(s), value_int(s)), or the output of an Identity of a constant: the PyTorch
//    exporter shares biases between layers through Identity nodes.
//  - Reads count node inputs of the main graph, inputs of nodes in subgraphs (If/Loop bodies may
//    read outer values) and graph outputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "onnx/onnx_pb.h"

namespace tide::optimize {

class GraphIndex {
 public:
  explicit GraphIndex(const onnx::GraphProto& g);

  const onnx::GraphProto& graph() const { return *graph_; }

  // The node (index into graph().node()) that writes `value`; nullopt for graph inputs,
  // initializers and unknown names.
  std::optional<int> Producer(const std::string& value) const;
  const onnx::NodeProto* ProducerNode(const std::string& value) const;
  // The producer when it is an `op_type` node of the default (or `domain`) domain, else nullptr.
  const onnx::NodeProto* ProducerOp(const std::string& value, const std::string& op_type,
                                    const std::string& domain = "") const;

  // Main-graph nodes that read `value` (once per reading node).
  const std::vector<int>& Consumers(const std::string& value) const;
  // How many times `value` is read anywhere (main-graph inputs, subgraphs, graph outputs).
  int ReadCount(const std::string& value) const;
  bool IsGraphOutput(const std::string& value) const;
  bool IsGraphInput(const std::string& value) const;  // a real input, not an initializer
  const onnx::ValueInfoProto* GraphInput(const std::string& value) const;

  // The constant tensor behind `value` (see the contract), or nullptr.
  const onnx::TensorProto* Constant(const std::string& value) const;
  // A constant's numbers as doubles (float, double, int32, int64 tensors), or nullopt.
  std::optional<std::vector<double>> ConstantValues(const std::string& value) const;
  // A constant holding exactly one number (any rank), or nullopt.
  std::optional<double> ScalarConstant(const std::string& value) const;

  int opset() const { return opset_; }  // default-domain opset version of the model, 0 if unknown
  void set_opset(int v) { opset_ = v; }

 private:
  const onnx::GraphProto* graph_;
  std::unordered_map<std::string, int> producer_;
  std::unordered_map<std::string, std::vector<int>> consumers_;
  std::unordered_map<std::string, int> reads_;
  std::unordered_map<std::string, const onnx::TensorProto*> initializers_;
  std::unordered_map<std::string, onnx::TensorProto> constant_nodes_;  // Constant node outputs
  std::unordered_map<std::string, const onnx::ValueInfoProto*> inputs_;
  std::unordered_map<std::string, bool> outputs_;
  int opset_ = 0;
};

// True for the default ONNX domain ("" or "ai.onnx").
bool IsDefaultDomain(const onnx::NodeProto& n);
// The attribute `name` of `n`, or nullptr.
const onnx::AttributeProto* FindAttribute(const onnx::NodeProto& n, const std::string& name);
std::optional<int64_t> IntAttribute(const onnx::NodeProto& n, const std::string& name);
std::optional<std::vector<int64_t>> IntsAttribute(const onnx::NodeProto& n, const std::string& name);

// The output width N when `value` is written by a weight projection: MatMul (default domain) or
// com.microsoft DynamicQuantizeMatMul / MatMulIntegerToFloat whose B is a constant [K, N] tensor,
// or the dequantizing Mul(Cast<float>(MatMulInteger(x, W)), scale) of `tide quantize --format onnx`.
// nullopt for anything else. (Its output is then [..., N]: the shape fact the fusions rely on.)
std::optional<int64_t> WeightProjectionWidth(const GraphIndex& index, const std::string& value);
// The width N of `value` when it comes from such a projection through at most four width-keeping
// elementwise steps (a bias Add, the scale Muls and Cast of a per-row INT8 projection:
// tools/decoder_int8.py; MatMulInteger's constant [K, N]), else nullopt.
std::optional<int64_t> ProjectedWidth(const GraphIndex& index, std::string value);

}  // namespace tide::optimize
