// tide::api KServe v2 metadata and error bodies — `GET /v2`, `GET /v2/models/{m}[/versions/{v}]`,
// and the {"error": "..."} body every /v2 endpoint returns on failure.
//
// Contract: pure renderers producing compact JSON; thread-safe; never fail or throw (invalid
// UTF-8 in names is replaced with U+FFFD). HTTP status for an error: HttpStatusFor (status_http.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "api/kserve_tensor.h"

namespace tide::api {

struct ServerMetadata {
  std::string name = "tide";
  std::string version;                  // e.g. "0.1.0"
  std::vector<std::string> extensions;  // e.g. {"binary_tensor_data", "model_repository"}
};

// One model input or output; -1 in `shape` marks a variable dimension (batch, sequence).
struct TensorMetadata {
  std::string name;
  DataType datatype = DataType::kFp32;
  std::vector<int64_t> shape;
};

struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;  // available versions, e.g. {"1"}
  std::string platform;               // e.g. "onnxruntime_onnx"
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
};

// {"name", "version", "extensions": [...]}
std::string RenderServerMetadata(const ServerMetadata& metadata);
// {"name", "versions": [...], "platform", "inputs": [{name, datatype, shape}], "outputs": [...]}
std::string RenderModelMetadata(const ModelMetadata& metadata);
// {"error": "<status message>"}
std::string RenderKServeError(const absl::Status& status);

}  // namespace tide::api
