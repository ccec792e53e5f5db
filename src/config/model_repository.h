// tide::config — the model repository: Triton's directory layout.
//
//   <repository>/<model name>/config.pbtxt          (optional, see below)
//   <repository>/<model name>/<version>/model.onnx   (version: a decimal directory name)
//
// Contract:
//  - ScanModelRepository lists every model directory (hidden entries and plain files at the top
//    level are skipped) and loads each with LoadRepositoryModel; the first failing model fails the
//    scan. LoadRepositoryModel loads one model directory.
//  - A missing config.pbtxt is replaced by a minimal generated config (name from the directory,
//    platform "onnxruntime_onnx"), as Triton does with --strict-model-config=false.
//  - The config's name must be empty or equal the directory name.
//  - Versions are chosen by version_policy (default: the latest one); a chosen version must have
//    its model file (default_model_filename, default "model.onnx"). A default_model_filename that
//    IsModelFileName refuses (absolute, "..", a '/') is never looked up: it gets the same NOT_FOUND
//    text as a name with no file in the version directory, whatever exists on disk.
//  - When Options::read_signature is set, the config is normalized and validated against the
//    model file of the newest chosen version (Parse -> Normalize -> Validate); otherwise only
//    parsed, with names and versions resolved. NormalizeModelForVersion does the same against
//    the model file of any one version (the repository controller loads version by version, so a
//    corrupt new version fails alone).
//  - Options::config_override replaces config.pbtxt (the repository API's load with
//    parameters.config); the file is then not read, and errors name the override.
//  - VersionConfig: a version folder may carry its own config.pbtxt (<model dir>/<version>/
//    config.pbtxt, optional), so that the versions of one model may differ in family during a
//    gray release (an encoder reranker as version 1, a decoder reranker with another tokenizer and
//    a prompt template as version 2). Its `parameters` override the model's key by key and its
//    `model_warmup`, when it has one, replaces the model's; every other field (name, inputs,
//    batching, instances, version_policy, ...) is the model's and is ignored there, so an exported
//    entry's config.pbtxt can be copied in as it is. VersionTokenizerPath: the tokenizer file
//    (parameter `tokenizer`) in the version folder when it holds one, else in the model folder.
//  - Errors name the file (and the field where one is at fault): INVALID_ARGUMENT for bad configs,
//    NOT_FOUND for missing directories, versions or model files. Blocking file I/O; thread-safe
//    when read_signature is.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/model_config.h"

namespace tide::config {

struct ModelVersion {
  int64_t version = 0;
  std::filesystem::path directory;   // <model dir>/<version>
  std::filesystem::path model_file;  // <model dir>/<version>/<default_model_filename>
};

struct RepositoryModel {
  std::string name;
  std::filesystem::path directory;
  std::filesystem::path config_file;      // <model dir>/config.pbtxt, even when generated
  bool config_generated = false;          // true: there was no config.pbtxt
  ModelConfig config;
  std::vector<int64_t> available_versions;  // every numeric subdirectory, ascending
  std::vector<ModelVersion> versions;       // chosen by version_policy, ascending
  std::vector<std::string> labels;          // a HuggingFace folder's id2label (hf_model_folder.h); else empty
};

struct RepositoryOptions {
  // Reads a model file's signature (e.g. runtime::OrtBackend::ReadSignature). Unset: configs are
  // not normalized against their models.
  std::function<absl::StatusOr<ModelSignature>(const std::filesystem::path& model_file)>
      read_signature;
  NormalizeOptions normalize;
  // Used in place of <model dir>/config.pbtxt when set (then config_generated stays false).
  std::optional<ModelConfig> config_override;
};

inline constexpr std::string_view kConfigFilename = "config.pbtxt";

absl::StatusOr<std::vector<RepositoryModel>> ScanModelRepository(
    const std::filesystem::path& repository, const RepositoryOptions& options = {});

absl::StatusOr<RepositoryModel> LoadRepositoryModel(const std::filesystem::path& model_dir,
                                                    const RepositoryOptions& options = {});

// Normalizes and validates `model->config` in place against the model file of `version`, read with
// options.read_signature (INVALID_ARGUMENT without one). Call it on a model loaded without
// read_signature, once per version (on a copy of the model for each).
absl::Status NormalizeModelForVersion(const ModelVersion& version, const RepositoryOptions& options,
                                      RepositoryModel* model);

// The configuration `version` is served with (see the contract): the model's, with the version
// folder's config.pbtxt parameters and model_warmup over it. `source` (optional) is set to the file
// errors about it should name: the version's config.pbtxt when there is one, else the model's.
absl::StatusOr<ModelConfig> VersionConfig(const RepositoryModel& model, const ModelVersion& version,
                                          std::string* source = nullptr);
inline constexpr std::string_view kVersionConfigFilename = "config.pbtxt";

// The version's tokenizer file named `tokenizer` (a relative path): <version dir>/tokenizer when
// it exists, else <model dir>/tokenizer.
std::filesystem::path VersionTokenizerPath(const RepositoryModel& model, const ModelVersion& version,
                                           const std::string& tokenizer);

// Where errors about `model`'s configuration point: its config.pbtxt, or the override.
std::string ConfigSource(const RepositoryModel& model, const RepositoryOptions& options);

}  // namespace tide::config
