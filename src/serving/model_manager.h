// tide::serving::ModelManager — every model version the server serves, loaded from a Triton-style
// model repository, looked up by name and version.
//
// Contract:
//  - Create scans the repository (Parse -> Normalize -> Validate each config.pbtxt), reads the
//    HuggingFace folders, loads and warms up every chosen version of every model, and fails with
//    the first error, which names the file and the field. When Create returns, every model is ready.
//  - Thread-safe. Find returns a shared_ptr so that a caller keeps its model alive for the whole
//    request even if a later reload replaces it.
//  - Errors: NOT_FOUND naming the model (and version) for unknown ones.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "config/hf_model_folder.h"
#include "config/model_repository.h"
#include "serving/served_model.h"

namespace tide::serving {

struct ModelManagerOptions {
  std::filesystem::path repository;  // Triton-style model repository; empty: none
  // HuggingFace model folders served besides the repository's models (`tide serve --model`), each
  // as one model (config::LoadHuggingFaceFolder); a name the repository also has is an error.
  std::vector<config::HuggingFaceFolderOptions> huggingface_folders;
  ServedModelOptions model;          // applied to every model
};

class ModelManager {
 public:
  static absl::StatusOr<std::unique_ptr<ModelManager>> Create(const ModelManagerOptions& options);
  ~ModelManager();

  // `version` empty: the newest loaded version.
  absl::StatusOr<std::shared_ptr<ServedModel>> Find(std::string_view name, std::string_view version = {}) const;
  // The model used by endpoints that name none (TEI's /rerank): the only model, or the first by name.
  absl::StatusOr<std::shared_ptr<ServedModel>> Default() const;
  std::vector<std::shared_ptr<ServedModel>> All() const;
  // Every loaded version number of `name`, ascending (empty when unknown).
  std::vector<int64_t> Versions(std::string_view name) const;

  bool AllReady() const;
  // Mirrors batcher and instance state into the metrics' gauges (call before rendering).
  void RefreshMetrics() const;
  // Shuts every model down (ServedModel::Shutdown), all against one deadline: the whole call
  // takes at most until `deadline` plus the batches running then. Without one: now + each
  // model's shutdown_grace.
  void Shutdown();
  void Shutdown(std::chrono::steady_clock::time_point deadline);

 private:
  ModelManager() = default;
  ServingMetrics* metrics_ = nullptr;
  mutable absl::Mutex refresh_mu_;  // serializes RefreshMetrics (counter mirroring)
  mutable absl::Mutex mu_;
  // name -> version -> model
  std::map<std::string, std::map<int64_t, std::shared_ptr<ServedModel>>, std::less<>> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tide::serving
