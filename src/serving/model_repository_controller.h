// tide::serving::ModelRepositoryController — the one loader driver: every model the server serves
// is loaded through it, in every one of Triton's model control modes, into a ModelManager (which
// only holds what is served); it decides which versions of the repository's models are served,
// loads and unloads them while the server runs, and keeps the state table the repository index
// reports. How a version is built (the loader and the backend, ONNX Runtime in production) is the
// factory the composition root injects; the controller never constructs a backend itself.
//
//   none      Start loads the whole repository once (a bad model anywhere fails start-up) and the
//             HuggingFace folders; nothing changes afterwards.
//   poll      Start loads every model; then every poll_interval the repository is rescanned and
//             added, removed and changed models and versions are applied (a changed config.pbtxt
//             or top-level file such as tokenizer.json reloads every version of its model; a
//             changed file under a version folder reloads that version).
//   explicit  Start loads startup_models ("*": all); then only Load / Unload change anything.
//
// Contract:
//  - Create only checks the options (a factory and a signature reader are required: the composition
//    root injects them; tests inject fakes); Start does the start-up loading and fails with the
//    first error (the server then exits, as Triton does with --exit-on-error). Start first reads
//    every HuggingFace folder (huggingface_folders, `tide serve --model`; in mode none after
//    scanning the whole repository, and a folder whose name a repository model has is refused
//    before anything is built), then builds their versions. Models served from elsewhere when
//    Start runs (the folders, tests' models added to the manager, everything in mode none) are
//    listed READY and never touched: in poll and explicit mode a repository model of the same
//    name fails to load. In mode none a start with nothing to serve fails (NOT_FOUND).
//  - One operation at a time: Poll, Load and Unload hold one mutex for their whole run, so loads
//    are serialised (at most one model being loaded and warmed up at once, whichever thread asks)
//    and two versions of one (name, version) coexist only while that version is swapped.
//  - Loading is off the request path: a version is loaded and warmed up (ServedModel::Create) on
//    the calling thread — the controller's thread for polls and for the *Async calls — and then
//    swapped in with ModelManager::Add / Replace, atomically; in-flight requests finish on the
//    version they found. A version no longer chosen is removed (ModelManager::Remove) only after
//    the versions chosen instead are served, and shows UNLOADING until its last request is done.
//  - A failed load leaves what is served untouched: a new version shows UNAVAILABLE with the
//    loader's message (it names the file and the field); a served version whose reload failed stays
//    READY, serving its previous load, with the failure as its reason; a model whose config cannot
//    be read at all gets a whole-model UNAVAILABLE entry. A failed load is not retried by polls
//    until its files change (Load retries it).
//  - Errors: FORBIDDEN (tide::errors) for Load / Unload outside explicit mode; NOT_FOUND for a
//    model that is not in the repository; INVALID_INPUT for a failed load (the loader's message)
//    and for a bad parameters.config (one over the admin input bounds of api/admin_input.h is
//    refused before it is parsed or queued); UNAVAILABLE for *Async calls queued when Stop runs.
//  - Thread-safe. Index never waits for a running load. Stop (and the destructor) waits for the
//    operation running on the controller's thread; the manager must outlive the controller.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "config/hf_model_folder.h"
#include "config/model_repository.h"
#include "serving/model_directory.h"
#include "serving/model_manager.h"
#include "serving/model_state_table.h"
#include "serving/served_model.h"

namespace tide::serving {

enum class ModelControlMode { kNone, kPoll, kExplicit };

// Builds one served version: the composition root's loader and backend factory (LoadModel + one
// ONNX Runtime session per instance in production; fakes in tests).
using ServedModelFactory = std::function<absl::StatusOr<std::unique_ptr<ServedModel>>(
    const config::RepositoryModel&, const config::ModelVersion&, const ServedModelOptions&)>;

// "none" | "poll" | "explicit" (INVALID_ARGUMENT otherwise).
absl::StatusOr<ModelControlMode> ParseModelControlMode(std::string_view text);
std::string_view ModelControlModeName(ModelControlMode mode);

struct ModelRepositoryControllerOptions {
  ModelControlMode mode = ModelControlMode::kNone;
  std::filesystem::path repository;  // required in poll and explicit mode; mode none: may be empty
  // HuggingFace model folders served besides the repository's models (`tide serve --model`), each
  // as one model (config::LoadHuggingFaceFolder), loaded once by Start in every mode.
  std::vector<config::HuggingFaceFolderOptions> huggingface_folders;
  // Poll mode: time between rescans (Triton's --repository-poll-secs, default 15 s).
  std::chrono::milliseconds poll_interval{15000};
  // Explicit mode: models Start loads (Triton's --load-model); "*" loads every model.
  std::vector<std::string> startup_models;
  // How model directories are read; read_signature is required (the composition root's:
  // runtime::OrtBackend::ReadSignature). config_override is set per Load request and ignored here.
  config::RepositoryOptions repository_options;
  ServedModelFactory factory;  // required: builds every version loaded
  ServedModelOptions model;    // applied to every version loaded
  // Told (name, version) on a retirement thread once an unloaded version has finished its last
  // request and shut down (UNLOADING -> UNAVAILABLE); tests wait on it. May be empty.
  std::function<void(const std::string& name, int64_t version)> on_unloaded;
  // false (tests): no controller thread; Poll is called directly and the *Async calls run on the
  // caller's thread.
  bool run_thread = true;
};

class ModelRepositoryController {
 public:
  static absl::StatusOr<std::unique_ptr<ModelRepositoryController>> Create(ModelManager* manager,
                                                                            ModelRepositoryControllerOptions options);
  ~ModelRepositoryController();  // Stop()

  // Start-up loading (see the modes above), then the controller's thread starts.
  absl::Status Start();
  // Stops the controller's thread after the operation it is running (a poll stops before its next
  // version load); queued *Async operations are answered UNAVAILABLE. Idempotent. RequestStop does
  // the same without waiting (on SIGTERM the drain then runs beside a load in progress); Stop and
  // the destructor wait for the thread.
  void RequestStop();
  void Stop();

  // One rescan of the repository (poll mode; FAILED_PRECONDITION in the others). A model's errors
  // are recorded in the state table and logged; the returned status is the first one.
  absl::Status Poll();
  // Explicit mode: loads the chosen versions of `name` that are not served or whose files changed
  // (all of them with `config_json`, Triton's JSON ModelConfig used in place of config.pbtxt), and
  // unloads the versions its version_policy no longer chooses.
  absl::Status Load(std::string_view name, const std::optional<std::string>& config_json = std::nullopt);
  // Explicit mode: unloads every version of `name`; each finishes its in-flight requests first.
  absl::Status Unload(std::string_view name);

  // The same, run on the controller's thread (queued behind the operation running there); `done`
  // gets the outcome on that thread. For the HTTP edge, whose threads must not block on a load.
  using Done = absl::AnyInvocable<void(absl::Status) &&>;
  void LoadAsync(std::string name, std::optional<std::string> config_json, Done done);
  void UnloadAsync(std::string name, Done done);

  // Triton's repository index: every version in the state table, the models the manager serves
  // from elsewhere, and (poll and explicit mode) the repository's other models as one whole-model
  // UNAVAILABLE "not loaded" entry each. `ready_only`: READY entries only.
  std::vector<ModelStateEntry> Index(bool ready_only = false) const;

  ModelControlMode mode() const { return options_.mode; }

 private:
  ModelRepositoryController(ModelManager* manager, ModelRepositoryControllerOptions options);

  // What the controller remembers of a repository model between operations.
  struct ModelRecord {
    bool looked = false;
    std::string model_fingerprint;  // of the last look (with the config override, if any)
    std::map<int64_t, std::string> version_fingerprints;
    std::map<int64_t, std::string> attempted;  // version -> fingerprint its last load attempt saw
  };

  // Brings `name` in line with its directory (see the class contract); `explicit_request` also
  // retries failed versions and looks even when nothing changed.
  absl::Status ReconcileModel(const std::string& name, const std::optional<std::string>& config_json,
                              bool explicit_request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_);
  // Loads and warms up one version, then Add (new) or Replace (served).
  absl::Status LoadVersion(const config::RepositoryModel& model, const config::ModelVersion& version,
                           const config::RepositoryOptions& repository_options, bool replace)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_);
  void UnloadVersion(const std::string& name, int64_t version, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_);
  // Every model directory of the repository, sorted (serving/model_directory.h).
  absl::StatusOr<std::vector<std::string>> ListModels() const;
  absl::Status CheckExplicit(std::string_view operation) const;
  // Start's first step: the HuggingFace folders, and in mode none the whole repository, read and
  // checked first, then built and served; each is listed READY and left alone afterwards.
  absl::Status LoadOnceAtStart() ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_);

  // Runs `op` on the controller's thread (on the caller's without one); op(false): Stop ran first.
  void Enqueue(absl::AnyInvocable<void(bool run) &&> op);
  void ThreadMain();
  bool Wakeable() const ABSL_SHARED_LOCKS_REQUIRED(queue_mu_) { return stop_ || !queue_.empty(); }
  bool stopping() const;

  ModelManager* const manager_;
  const ModelRepositoryControllerOptions options_;
  // Shared with the manager's retirement callback, which may run after the controller is gone.
  const std::shared_ptr<ModelStateTable> table_ = std::make_shared<ModelStateTable>();

  absl::Mutex op_mu_;  // one operation (Start, Poll, Load, Unload) at a time
  std::map<std::string, ModelRecord> records_ ABSL_GUARDED_BY(op_mu_);
  // Names the manager served before Start: not the controller's to change.
  std::set<std::string, std::less<>> external_ ABSL_GUARDED_BY(op_mu_);

  mutable absl::Mutex queue_mu_;
  std::deque<absl::AnyInvocable<void(bool) &&>> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool stop_ ABSL_GUARDED_BY(queue_mu_) = false;
  bool thread_started_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::thread thread_;
};

}  // namespace tide::serving
