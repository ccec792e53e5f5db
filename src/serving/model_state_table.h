// tide::serving::ModelStateTable — the state of every model version the repository controller
// knows, as Triton's repository index reports it: (name, version) -> READY / LOADING / UNLOADING /
// UNAVAILABLE, with a reason.
//
// Contract:
//  - Thread-safe: the controller's thread writes while HTTP threads read (Snapshot) and the model
//    manager's retirement threads move UNLOADING versions on (Transition). Every call takes one
//    short lock and never blocks otherwise.
//  - A version of nullopt is the model as a whole: an entry for a model whose configuration cannot
//    be read (so no version is known) or that is in the repository but not loaded.
//  - Snapshot is sorted by name, then version (the whole-model entry first).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tide::serving {

// Triton's model states (the repository extension's "state" field).
enum class ModelState {
  kReady,        // loaded, warmed up and served
  kLoading,      // being loaded and warmed up (not served yet)
  kUnloading,    // no longer chosen; finishing its in-flight requests
  kUnavailable,  // not served: failed to load (reason says why) or unloaded
};

// "READY", "LOADING", "UNLOADING", "UNAVAILABLE".
std::string_view ModelStateName(ModelState state);

struct ModelStateEntry {
  std::string name;
  std::optional<int64_t> version;  // nullopt: the model as a whole
  ModelState state = ModelState::kUnavailable;
  std::string reason;  // why it is not READY (or, READY, what failed beside it); may be empty
};

class ModelStateTable {
 public:
  void Set(std::string_view name, std::optional<int64_t> version, ModelState state, std::string reason = {});
  // Moves (name, version) from `from` to `to` with `reason`; false (nothing changed) when the entry
  // is absent or in another state.
  bool Transition(std::string_view name, std::optional<int64_t> version, ModelState from, ModelState to,
                  std::string reason = {});
  void Erase(std::string_view name, std::optional<int64_t> version);
  void EraseModel(std::string_view name);
  std::optional<ModelStateEntry> Get(std::string_view name, std::optional<int64_t> version) const;
  std::vector<ModelStateEntry> Snapshot() const;

 private:
  // nullopt sorts before every version (std::optional's ordering).
  using Key = std::pair<std::string, std::optional<int64_t>>;
  mutable absl::Mutex mu_;
  std::map<Key, ModelStateEntry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tide::serving
