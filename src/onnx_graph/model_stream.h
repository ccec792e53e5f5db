// tide::onnx_graph::StreamModelFile — reads an .onnx file without ever holding its weights: each
// large initializer's bytes go straight from the file into memory the caller chooses.
//
// Why: a protobuf parse materialises every tensor of the model at once (bge-reranker-base:
// 1.1 GB), so a load that parses the file peaks at the model's size on top of whatever the server
// keeps. Walking the wire format instead lets the caller copy one tensor at a time into its own
// storage (runtime::SharedWeights writes them into its weights file) and keep only the graph.
//
// Contract:
//  - Reads the file's protobuf wire format: ModelProto (the graph is field 7), its main GraphProto
//    (initializer is field 5) and each initializer's TensorProto (raw_data is field 9) are walked
//    field by field; everything else (nodes, inputs, small tensors) is parsed by protobuf as
//    usual. Fields may come in any order and repeat, with protobuf's merge semantics (the last
//    raw_data wins, a repeated graph field merges).
//  - For every main-graph initializer holding at least `min_bytes` of data, either as raw_data or
//    as external data beside the model (TensorProto.data_location EXTERNAL: location, offset,
//    length; the rules of LoadModel: a relative path inside the model's folder, a range inside
//    the file), calls `sink` with the tensor as parsed without its data (name, dims, data_type,
//    ...) and the data's size in bytes. The sink says where the bytes go (TensorDestination):
//    into memory, into a file at an offset (copied file to file: copy_file_range, else pread +
//    pwrite through a 1 MiB buffer; the bytes never pass through the caller's memory), nowhere
//    (skip: a reader of the graph's structure), or, by default, into the tensor's raw_data. It
//    may change the tensor (the returned model holds it as the sink leaves it, minus the bytes
//    it took). A sink error ends the read and is returned.
//  - Every other tensor with external data (smaller initializers, tensors in nodes' attributes
//    and subgraphs) is read into raw_data, as LoadModel does: the returned model refers to no file.
//  - Memory: the graph, the small tensors and one read buffer; a tensor's bytes are never held
//    by the reader. The file may be larger than protobuf's 2 GB message limit (the rest must fit).
//  - Errors: NOT_FOUND (cannot open the model or an external data file), INVALID_ARGUMENT
//    ("<path>: not a valid ONNX model" for a malformed or truncated file or one without a graph;
//    unsafe or truncated external data, naming the initializer), INTERNAL for read errors, and
//    whatever the sink returns.
//  - Free function; thread-compatible (the sink is called on the caller's thread, in file order).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace tide::onnx_graph {

struct TensorDestination {
  void* memory = nullptr;  // copy the bytes here (at least that many writable bytes)
  int fd = -1;             // or write them to this file (>= 0) at `offset`
  uint64_t offset = 0;
  bool skip = false;       // or leave them unread
  // None of these: the bytes stay in the tensor's raw_data.
};

using TensorSink = std::function<absl::StatusOr<TensorDestination>(onnx::TensorProto* tensor, uint64_t bytes)>;

absl::StatusOr<onnx::ModelProto> StreamModelFile(const std::string& path, uint64_t min_bytes, const TensorSink& sink);

}  // namespace tide::onnx_graph
