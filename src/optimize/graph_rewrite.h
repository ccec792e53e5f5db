// tide::optimize graph rewriting helpers shared by the fusion passes.
//
// Contract: free functions on onnx protobuf messages; thread-compatible.
//  - NodeReplacements collects "node i becomes these nodes" edits and applies them in one pass,
//    keeping the graph's topological order (replacement nodes take the replaced node's place;
//    `prepend` nodes go first, so they may only read graph inputs and initializers).
//  - RemoveDeadNodes drops nodes none of whose outputs is read (by a node, a subgraph or a graph
//    output), then value_info entries for values that no longer exist. Returns nodes removed.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

namespace tide::optimize {

struct NodeReplacements {
  std::map<int, onnx::NodeProto> replace;  // node index -> its replacement
  std::vector<onnx::NodeProto> prepend;
  bool empty() const { return replace.empty() && prepend.empty(); }
  void ApplyTo(onnx::GraphProto* g);
};

int RemoveDeadNodes(onnx::GraphProto* g);

// A float32 initializer `name` with `dims` and `values` (raw little-endian data).
onnx::TensorProto MakeFloatTensor(const std::string& name, const std::vector<int64_t>& dims,
                                  const std::vector<float>& values);
// A rank-1 int64 initializer `name` holding `values`.
onnx::TensorProto MakeInt64Vector(const std::string& name, const std::vector<int64_t>& values);
void AddIntAttribute(onnx::NodeProto* n, const std::string& name, int64_t v);
void AddFloatAttribute(onnx::NodeProto* n, const std::string& name, float v);

}  // namespace tide::optimize
