// tide::config — a model's config.pbtxt: Parse -> Normalize -> Validate.
//
// Contract:
//  - The configuration language is Triton's ModelConfig in protobuf text format, restricted to
//    the subset in proto/model_config.proto; a Triton config.pbtxt for an ONNX Runtime model
//    loads unchanged.
//  - ParseModelConfig checks syntax, field names and value types. A Triton field that tide does not
//    support (sequence_batching, ensemble_scheduling, optimization, ...) is rejected as
//    unsupported rather than ignored.
//  - NormalizeModelConfig fills what the user may omit, from the model itself where needed
//    (inputs/outputs, as Triton's auto-complete does) and from Triton's defaults otherwise.
//  - ValidateModelConfig checks that tide can honour the normalized config, including tide's own
//    `parameters` (see tide_parameters.h) and, when given the model's signature, that the
//    config's tensors match the model's.
//  - Bounds: instance_group counts (kMaxInstanceCount per group, kMaxModelInstances in all) and
//    default_model_filename (IsModelFileName), for config.pbtxt files and JSON overrides alike.
//  - Every error is INVALID_ARGUMENT and its message starts with "<file>: " and names the field
//    in path form, e.g. "models/x/config.pbtxt: input[1].data_type: ...". (Parse errors also
//    give line:column.)
//  - All functions are pure: thread-safe, non-blocking, no I/O except ReadModelConfigFile.
#pragma once

#include <filesystem>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "domain/model_signature.h"
#include "model_config.pb.h"

namespace tide::config {

using ::tide::ModelConfig;

// Platform and backend names of Triton's ONNX Runtime backend; tide accepts only these.
inline constexpr std::string_view kOnnxRuntimePlatform = "onnxruntime_onnx";
inline constexpr std::string_view kOnnxRuntimeBackend = "onnxruntime";
inline constexpr std::string_view kDefaultModelFilename = "model.onnx";

// instance_group bounds: each group's count within 1..kMaxInstanceCount (0 normalizes to 1), and
// all groups' counts together at most kMaxModelInstances. Each instance is an ONNX Runtime session
// with its own threads and buffers; 64 is several times the cores of a large CPU host.
inline constexpr int32_t kMaxInstanceCount = 64;
inline constexpr int64_t kMaxModelInstances = 64;

// Whether `name` may be a default_model_filename: a file name inside the version directory, i.e.
// one path component — not empty, not "." or "..", no '/' (so neither absolute nor reaching
// elsewhere), no '\\' and no NUL. (Triton joins the name to the version directory; tide takes no
// subdirectory.) Decided on the text alone, before any file is opened.
bool IsModelFileName(std::string_view name);

// Parses config.pbtxt text. `file` is only used in error messages.
absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view text, std::string_view file);

// Parses Triton's JSON form of ModelConfig (protobuf's JSON mapping: field names as in the proto or
// in lowerCamelCase, enums by name, 64-bit integers as numbers or strings), as the repository API's
// load request carries it in parameters.config. The same checks as ParseModelConfig: unknown fields
// fail (Triton fields tide leaves out say why). `file` is only used in error messages.
absl::StatusOr<ModelConfig> ParseModelConfigJson(std::string_view json, std::string_view file);

// Reads and parses a config file (NOT_FOUND if it does not exist).
absl::StatusOr<ModelConfig> ReadModelConfigFile(const std::filesystem::path& path);

struct NormalizeOptions {
  // max_batch_size given to a config that leaves it 0 while its inputs are auto-completed from a
  // model with a dynamic batch dimension (Triton's ONNX Runtime backend picks 4; rerank requests
  // carry tens of documents, so tide picks more).
  int32_t default_max_batch_size = 32;
};

// Completes `config` in place:
//  - platform/backend: "onnxruntime_onnx"/"onnxruntime" when absent;
//  - input/output: from `model` when the config lists none (ids dims [-1], output dims
//    [num_labels]), and max_batch_size from options when it is 0 in that case;
//  - version_policy: latest { num_versions: 1 }; instance_group: one KIND_CPU group, count 1
//    (count 0 -> 1, KIND_AUTO -> KIND_CPU); default_model_filename: "model.onnx".
absl::Status NormalizeModelConfig(std::string_view file, const ModelSignature& model,
                                  ModelConfig* config, const NormalizeOptions& options = {});

// Checks a normalized config. `model` may be null (no model at hand): then the tensor checks
// against the model are skipped.
absl::Status ValidateModelConfig(std::string_view file, const ModelConfig& config,
                                 const ModelSignature* model);

// Triton's name for a data type ("TYPE_INT64").
std::string_view DataTypeName(DataType type);

}  // namespace tide::config
