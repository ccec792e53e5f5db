// tide::serving::ModelManager — every model version the server serves, looked up by name and
// version. It only holds what is served: loading (every control mode) is the repository
// controller's (serving/model_repository_controller.h), which adds, replaces and removes versions.
//
// Contract:
//  - Thread-safe. Find returns a shared_ptr so that a caller keeps its model alive for the whole
//    request even if a later reload replaces it.
//  - Add / Replace / Remove change the (name, version) -> model map atomically under one mutex:
//    a Find after the call sees the new state, a request that found the old version before it
//    finishes on the old one. A replaced or removed version is retired: it shuts down (drains its
//    queue, ServedModel::Shutdown) when its last holder releases it, on a thread of its own (never
//    on an instance or I/O thread), and the manager's destructor waits for the retirements.
//  - SetRetiredCallback: told (name, version) after a retired version has shut down and been
//    destroyed, on the thread that destroyed it, outside the manager's locks (the repository
//    controller turns UNLOADING into UNAVAILABLE with it).
//  - Errors: NOT_FOUND naming the model (and version) for unknown ones; ALREADY_EXISTS from Add
//    for a version already served.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "serving/served_model.h"

namespace tide::serving {

class ModelManager {
 public:
  // A manager serving nothing yet; models come through Add (the repository controller, tests).
  // `metrics`: where RefreshMetrics mirrors the models' state; may be null.
  static std::unique_ptr<ModelManager> Create(ServingMetrics* metrics = nullptr);
  ~ModelManager();

  // Serves `model` as (model->name(), model->version()); ALREADY_EXISTS if that version is served.
  absl::Status Add(std::unique_ptr<ServedModel> model);
  // Atomically swaps the served (model->name(), model->version()) for `model`; NOT_FOUND if that
  // version is not served. The old one is retired (see the contract above).
  absl::Status Replace(std::unique_ptr<ServedModel> model);
  // Stops serving (name, version) and retires it; NOT_FOUND if not served.
  absl::Status Remove(std::string_view name, int64_t version);

  // `version` empty: the newest loaded version.
  absl::StatusOr<std::shared_ptr<ServedModel>> Find(std::string_view name, std::string_view version = {}) const;
  // The model used by endpoints that name none (TEI's /rerank): the only model, or the first by name.
  absl::StatusOr<std::shared_ptr<ServedModel>> Default() const;
  std::vector<std::shared_ptr<ServedModel>> All() const;
  // Every loaded version number of `name`, ascending (empty when unknown).
  std::vector<int64_t> Versions(std::string_view name) const;

  // Called with (name, version) once a replaced or removed version has shut down and been
  // destroyed (see the contract). Replaces any earlier callback; null: none.
  void SetRetiredCallback(std::function<void(const std::string& name, int64_t version)> callback);

  bool AllReady() const;
  // Mirrors batcher and instance state into the metrics' gauges (call before rendering).
  void RefreshMetrics() const;
  // Shuts every model down (ServedModel::Shutdown), all against one deadline: the whole call
  // takes at most until `deadline` plus the batches running then. Without one: now + each
  // model's shutdown_grace.
  void Shutdown();
  void Shutdown(std::chrono::steady_clock::time_point deadline);

 private:
  ModelManager();
  // Owns `model` for the map: a shared_ptr whose deleter retires the model if it was replaced or
  // removed, else shuts it down in place (the manager's own end).
  std::shared_ptr<ServedModel> Own(std::unique_ptr<ServedModel> model);
  // Marks `model` retired; its last holder's release then shuts it down on a thread of its own.
  void Retire(std::shared_ptr<ServedModel> model);

  struct Retirements;
  std::shared_ptr<Retirements> retirements_;
  ServingMetrics* metrics_ = nullptr;
  mutable absl::Mutex refresh_mu_;  // serializes RefreshMetrics (counter mirroring)
  mutable absl::Mutex mu_;
  // name -> version -> model
  std::map<std::string, std::map<int64_t, std::shared_ptr<ServedModel>>, std::less<>> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tide::serving
