// tide::onnx_graph model I/O — read and write ONNX ModelProto files, with external data: the one
// ONNX reader of the project (the passes, the runtime's shared weights and serving's token limits
// all read models through it).
//
// Contract:
//  - ReadModelFile parses `path` as it is, streaming from the file (no second copy of its bytes);
//    initializers stored as external data stay references to their files. For readers that look
//    at the graph or at inline weights only. Errors: NOT_FOUND (cannot open), INVALID_ARGUMENT
//    (not an ONNX model; the message names the file).
//  - LoadModel parses `path` and pulls every initializer stored as external data (the layout
//    PyTorch and ONNX use for models over 2 GB: TensorProto.data_location = EXTERNAL with
//    location/offset/length entries) into raw_data, so the passes see every weight in memory.
//    External files must lie in the model's folder (no absolute paths, no ".."): a model is
//    untrusted input. Errors: NOT_FOUND (missing file), INVALID_ARGUMENT (not an ONNX model,
//    truncated or unsafe external data).
//  - SaveModel writes the model to `path`. With ExternalData::kAuto it writes one file when the
//    serialized model fits comfortably under protobuf's 2 GB limit, and otherwise moves every
//    initializer of at least `external_threshold_bytes` to "<file name>.data" beside it (the
//    layout ONNX Runtime loads). Errors: INTERNAL for I/O failures.
//    SaveModel moves the bytes of externalised initializers out of `model` (hence non-const).
//  - ResolveExternalData: the checked file range of one external tensor (the rules above).
//  - Free functions, no shared state; thread-compatible.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace tide::onnx_graph {

enum class ExternalData {
  kAuto,    // external only when the single file would exceed ~1.8 GB
  kAlways,  // always move large initializers to "<name>.data"
  kNever,   // single file; fails with FAILED_PRECONDITION over 2 GB
};

struct SaveOptions {
  ExternalData external_data = ExternalData::kAuto;
  int64_t external_threshold_bytes = 1024;  // smaller initializers stay inline
};

absl::StatusOr<onnx::ModelProto> LoadModel(const std::string& path);
absl::StatusOr<onnx::ModelProto> ReadModelFile(const std::string& path);  // external data left on disk
absl::StatusOr<onnx::ModelProto> ParseModel(const std::string& bytes);  // no external data
// The whole file in one string of its size (NOT_FOUND: cannot open; INTERNAL: read error).
absl::StatusOr<std::string> ReadFileBytes(const std::string& path);
absl::Status SaveModel(onnx::ModelProto& model, const std::string& path, const SaveOptions& options = {});

// Where the external data of `t` lies, checked as LoadModel checks it: `location` a relative path
// inside `model_dir` (no absolute path, no ".."), offset/length inside the file (no length: the
// tensor's size by its dims and type, as ONNX Runtime reads it; a tensor without one, to the end). Errors: INVALID_ARGUMENT (unsafe location, bad number, range past the end) or NOT_FOUND
// (no such file), naming the initializer.
struct ExternalRange {
  std::string file;  // model_dir/location
  uint64_t offset = 0;
  uint64_t length = 0;
};
absl::StatusOr<ExternalRange> ResolveExternalData(const onnx::TensorProto& t, const std::string& model_dir);

}  // namespace tide::onnx_graph
