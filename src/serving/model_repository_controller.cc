#include "serving/model_repository_controller.h"

#include <algorithm>
#include <fstream>
#include <system_error>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/admin_input.h"
#include "common/error.h"
#include "common/error_echo.h"
#include "config/model_config.h"
#include "spdlog/spdlog.h"

namespace tide::serving {
namespace fs = std::filesystem;

namespace {

// A "Vm...:  N kB" field of /proc/self/status in bytes (VmRSS: resident now; VmHWM: the process's
// peak resident size so far); 0 when /proc cannot tell.
int64_t ProcStatusBytes(std::string_view field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) != 0 || line.size() <= field.size() || line[field.size()] != ':') continue;
    int64_t kib = 0;
    std::string digits;
    for (char c : line) {
      if (c >= '0' && c <= '9') digits.push_back(c);
    }
    if (absl::SimpleAtoi(digits, &kib)) return kib * 1024;
  }
  return 0;
}
int64_t ResidentBytes() { return ProcStatusBytes("VmRSS"); }
int64_t PeakResidentBytes() { return ProcStatusBytes("VmHWM"); }

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// One line per repository API request (either edge), with the name as the admin sent it, escaped.
void LogRepositoryRequest(std::string_view operation, std::string_view name, const absl::Status& status) {
  if (status.ok()) {
    spdlog::info("repository: {} of model {} requested: done", operation, EscapeForLog(name));
  } else {
    spdlog::warn("repository: {} of model {} requested: refused: {}", operation, EscapeForLog(name),
                 EscapeForLog(std::string(status.message())));
  }
}

}  // namespace

absl::StatusOr<ModelControlMode> ParseModelControlMode(std::string_view text) {
  if (text == "none") return ModelControlMode::kNone;
  if (text == "poll") return ModelControlMode::kPoll;
  if (text == "explicit") return ModelControlMode::kExplicit;
  return absl::InvalidArgumentError(
      absl::StrCat("model control mode '", EchoForError(text), "': expected none, poll or explicit"));
}

std::string_view ModelControlModeName(ModelControlMode mode) {
  switch (mode) {
    case ModelControlMode::kNone: return "none";
    case ModelControlMode::kPoll: return "poll";
    case ModelControlMode::kExplicit: return "explicit";
  }
  return "none";
}

ModelRepositoryController::ModelRepositoryController(ModelManager* manager, ModelRepositoryControllerOptions options)
    : manager_(manager), options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<ModelRepositoryController>> ModelRepositoryController::Create(
    ModelManager* manager, ModelRepositoryControllerOptions options) {
  if (manager == nullptr) return absl::InvalidArgumentError("ModelRepositoryController: no model manager");
  if (options.mode != ModelControlMode::kNone && options.repository.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--model-control-mode ", std::string(ModelControlModeName(options.mode)),
                                                   " needs a model repository (--model-repository)"));
  }
  if (options.mode != ModelControlMode::kExplicit && !options.startup_models.empty()) {
    return absl::InvalidArgumentError("--load-model needs --model-control-mode explicit");
  }
  if (options.poll_interval <= std::chrono::milliseconds::zero()) {
    return absl::InvalidArgumentError("--repository-poll-secs must be positive");
  }
  if (!options.repository_options.read_signature || !options.factory) {
    return absl::InvalidArgumentError(
        "ModelRepositoryController: no model factory or signature reader (the composition root injects them)");
  }
  options.repository_options.config_override.reset();
  std::unique_ptr<ModelRepositoryController> controller(new ModelRepositoryController(manager, std::move(options)));
  // UNLOADING -> UNAVAILABLE once a version's last request is done and it has shut down. The
  // callback holds the table, not the controller: a retirement may end after the controller.
  manager->SetRetiredCallback([table = controller->table_, on_unloaded = controller->options_.on_unloaded](
                                   const std::string& name, int64_t version) {
    if (table->Transition(name, version, ModelState::kUnloading, ModelState::kUnavailable, "unloaded")) {
      spdlog::info("model {} version {}: unloaded (its last request finished); RSS {:.0f} MiB", EscapeForLog(name), version,
                   MiB(ResidentBytes()));
      if (on_unloaded) on_unloaded(name, version);
    }
  });
  return controller;
}

ModelRepositoryController::~ModelRepositoryController() {
  Stop();
  manager_->SetRetiredCallback(nullptr);
}

absl::Status ModelRepositoryController::Start() {
  {
    absl::MutexLock lock(&op_mu_);
    if (absl::Status s = LoadOnceAtStart(); !s.ok()) return s;
    for (const auto& model : manager_->All()) {
      table_->Set(model->name(), model->version(), ModelState::kReady);
      external_.insert(model->name());
    }
    if (options_.mode == ModelControlMode::kNone) return absl::OkStatus();
    std::vector<std::string> names;
    if (options_.mode == ModelControlMode::kPoll ||
        std::find(options_.startup_models.begin(), options_.startup_models.end(), "*") !=
            options_.startup_models.end()) {
      auto listed = ListModels();
      if (!listed.ok()) return listed.status();
      names = *std::move(listed);
    } else {
      names = options_.startup_models;
    }
    for (const std::string& name : names) {
      if (!IsModelName(name) || !fs::is_directory(options_.repository / name)) {
        return errors::NotFound(absl::StrCat("--load-model ", EchoForError(name), ": no such model in ",
                                             options_.repository.string()));
      }
      if (absl::Status s = ReconcileModel(name, std::nullopt, /*explicit_request=*/true); !s.ok()) return s;
    }
  }
  if (options_.run_thread) {
    absl::MutexLock lock(&queue_mu_);
    if (!stop_ && !thread_started_) {
      thread_started_ = true;
      thread_ = std::thread([this] { ThreadMain(); });
    }
  }
  return absl::OkStatus();
}

absl::Status ModelRepositoryController::LoadOnceAtStart() {
  const config::RepositoryOptions& ro = options_.repository_options;
  std::vector<config::RepositoryModel> models;
  if (options_.mode == ModelControlMode::kNone && !options_.repository.empty()) {
    auto scanned = config::ScanModelRepository(options_.repository, ro);
    if (!scanned.ok()) return scanned.status();
    models = *std::move(scanned);
  }
  const size_t from_repository = models.size();
  for (const config::HuggingFaceFolderOptions& folder : options_.huggingface_folders) {
    auto model = config::LoadHuggingFaceFolder(folder, ro);
    if (!model.ok()) return model.status();
    for (size_t i = 0; i < from_repository; ++i) {
      if (models[i].name == model->name) {
        return absl::AlreadyExistsError(absl::StrCat("model name '", model->name, "' of ", folder.folder.string(),
                                                     " is taken by ", models[i].directory.string(),
                                                     " (choose another with --served-model-name)"));
      }
    }
    const ModelParameter* task = nullptr;
    if (auto it = model->config.parameters().find("task"); it != model->config.parameters().end()) task = &it->second;
    spdlog::info("model {}: HuggingFace folder {}, model file {}, task {}{}", EscapeForLog(model->name),
                 folder.folder.string(), model->versions.back().model_file.string(),
                 task ? task->string_value() : "rerank",
                 model->labels.size() > 1
                     ? absl::StrCat(", score = P(label '", EscapeForLog(model->labels.back()), "')")
                     : "");
    models.push_back(*std::move(model));
  }
  if (options_.mode == ModelControlMode::kNone && models.empty()) {
    return errors::NotFound(absl::StrCat("model repository ", options_.repository.string(), " has no models"));
  }
  for (const config::RepositoryModel& model : models) {
    for (const config::ModelVersion& version : model.versions) {
      auto served = options_.factory(model, version, options_.model);
      if (served.ok() && *served == nullptr) served = absl::InternalError("the model factory returned no model");
      if (!served.ok()) return served.status();
      if (absl::Status s = manager_->Add(*std::move(served)); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

void ModelRepositoryController::RequestStop() {
  absl::MutexLock lock(&queue_mu_);
  stop_ = true;
}

void ModelRepositoryController::Stop() {
  RequestStop();
  if (thread_.joinable()) thread_.join();
}

bool ModelRepositoryController::stopping() const {
  absl::MutexLock lock(&queue_mu_);
  return stop_;
}

void ModelRepositoryController::Enqueue(absl::AnyInvocable<void(bool) &&> op) {
  {
    absl::MutexLock lock(&queue_mu_);
    if (thread_started_ && !stop_) {
      queue_.push_back(std::move(op));
      return;
    }
  }
  // No thread (tests, or mode none): run here. After Stop: answer at once.
  bool stopped = false;
  {
    absl::MutexLock lock(&queue_mu_);
    stopped = stop_;
  }
  std::move(op)(!stopped);
}

void ModelRepositoryController::ThreadMain() {
  const absl::Duration interval = absl::FromChrono(options_.poll_interval);
  absl::Time next_poll = absl::Now() + interval;
  for (;;) {
    absl::AnyInvocable<void(bool) &&> op;
    {
      absl::MutexLock lock(&queue_mu_);
      if (options_.mode == ModelControlMode::kPoll) {
        queue_mu_.AwaitWithDeadline(absl::Condition(this, &ModelRepositoryController::Wakeable), next_poll);
      } else {
        queue_mu_.Await(absl::Condition(this, &ModelRepositoryController::Wakeable));
      }
      if (stop_) break;
      if (!queue_.empty()) {
        op = std::move(queue_.front());
        queue_.pop_front();
      }
    }
    if (op) {
      std::move(op)(true);
      continue;
    }
    if (absl::Now() >= next_poll) {
      (void)Poll();  // errors are in the state table and the log
      next_poll = absl::Now() + interval;
    }
  }
  std::deque<absl::AnyInvocable<void(bool) &&>> left;
  {
    absl::MutexLock lock(&queue_mu_);
    left.swap(queue_);
  }
  for (auto& op : left) std::move(op)(false);
}

absl::StatusOr<std::vector<std::string>> ModelRepositoryController::ListModels() const {
  return ListModelDirectories(options_.repository);
}

absl::Status ModelRepositoryController::CheckExplicit(std::string_view operation) const {
  if (options_.mode == ModelControlMode::kExplicit) return absl::OkStatus();
  return errors::Forbidden(absl::StrCat("model ", std::string(operation), " is only allowed in explicit model control mode "
                                        "(--model-control-mode explicit); this server runs in mode ",
                                        std::string(ModelControlModeName(options_.mode))));
}

absl::Status ModelRepositoryController::Poll() {
  if (options_.mode != ModelControlMode::kPoll) {
    return errors::InvalidInput("Poll: the controller is not in poll mode");
  }
  absl::MutexLock lock(&op_mu_);
  auto names = ListModels();
  if (!names.ok()) {
    // A repository that vanished (an unmounted volume) is an error to report, not a reason to
    // unload every model.
    spdlog::error("repository poll: {}", EscapeForLog(std::string(names.status().message())));
    return names.status();
  }
  const std::set<std::string> present(names->begin(), names->end());
  // Models whose directory is gone: unload every version.
  std::vector<std::string> gone;
  for (const auto& [name, record] : records_) {
    if (!present.contains(name)) gone.push_back(name);
  }
  for (const std::string& name : gone) {
    spdlog::info("model {}: its directory left the repository; unloading it", EscapeForLog(name));
    for (int64_t v : manager_->Versions(name)) UnloadVersion(name, v, "removed from the repository");
    for (const ModelStateEntry& e : table_->Snapshot()) {
      if (e.name == name && e.state != ModelState::kUnloading) table_->Erase(e.name, e.version);
    }
    records_.erase(name);
  }
  // Unloaded entries of models no longer in the repository are forgotten on the next poll.
  for (const ModelStateEntry& e : table_->Snapshot()) {
    if (e.state == ModelState::kUnavailable && !present.contains(e.name) && !external_.contains(e.name)) {
      table_->Erase(e.name, e.version);
    }
  }
  absl::Status first;
  for (const std::string& name : *names) {
    if (stopping()) break;
    absl::Status s = ReconcileModel(name, std::nullopt, /*explicit_request=*/false);
    if (first.ok()) first = s;
  }
  return first;
}

absl::Status ModelRepositoryController::Load(std::string_view name, const std::optional<std::string>& config_json) {
  const absl::Status status = [&]() -> absl::Status {
    if (absl::Status s = CheckExplicit("load"); !s.ok()) return s;
    // Bounded (size, depth, strings) before protobuf's JSON parser sees it.
    if (config_json.has_value()) {
      if (absl::Status s = api::CheckAdminJsonText(*config_json, "parameters.config"); !s.ok()) return s;
    }
    if (!IsModelName(name) || !fs::is_directory(options_.repository / std::string(name))) {
      return errors::NotFound(absl::StrCat("model '", EchoForError(name), "' is not in the model repository"));
    }
    absl::MutexLock lock(&op_mu_);
    return ReconcileModel(std::string(name), config_json, /*explicit_request=*/true);
  }();
  LogRepositoryRequest("load", name, status);
  return status;
}

absl::Status ModelRepositoryController::Unload(std::string_view name_in) {
  const std::string name(name_in);
  const absl::Status status = [&]() -> absl::Status {
    if (absl::Status s = CheckExplicit("unload"); !s.ok()) return s;
    absl::MutexLock lock(&op_mu_);
    if (external_.contains(name)) {
      return errors::InvalidInput(absl::StrCat("model '", EchoForError(name),
                                               "' is not served from the model repository; it cannot be unloaded"));
    }
    const std::vector<int64_t> versions = manager_->Versions(name);
    if (versions.empty() && !records_.contains(name) &&
        !(IsModelName(name) && fs::is_directory(options_.repository / name))) {
      return errors::NotFound(absl::StrCat("model '", EchoForError(name), "' is not in the model repository"));
    }
    for (int64_t v : versions) UnloadVersion(name, v, "unload requested");
    table_->Erase(name, std::nullopt);
    records_.erase(name);  // a later Load reads the directory afresh
    return absl::OkStatus();
  }();
  LogRepositoryRequest("unload", name, status);
  return status;
}

void ModelRepositoryController::LoadAsync(std::string name, std::optional<std::string> config_json, Done done) {
  // An out-of-bounds parameters.config is answered at once, not after the loads queued before it.
  if (config_json.has_value()) {
    if (absl::Status s = api::CheckAdminJsonText(*config_json, "parameters.config"); !s.ok()) {
      return std::move(done)(s);
    }
  }
  Enqueue([this, name = std::move(name), config_json = std::move(config_json), done = std::move(done)](bool run) mutable {
    std::move(done)(run ? Load(name, config_json) : errors::Unavailable("the server is shutting down"));
  });
}

void ModelRepositoryController::UnloadAsync(std::string name, Done done) {
  Enqueue([this, name = std::move(name), done = std::move(done)](bool run) mutable {
    std::move(done)(run ? Unload(name) : errors::Unavailable("the server is shutting down"));
  });
}

absl::Status ModelRepositoryController::ReconcileModel(const std::string& name,
                                                       const std::optional<std::string>& config_json,
                                                       bool explicit_request) {
  const fs::path dir = options_.repository / name;
  if (external_.contains(name)) {
    const std::string reason = absl::StrCat("the name '", name, "' is taken by a model served from elsewhere (--model)");
    table_->Set(name, std::nullopt, ModelState::kUnavailable, reason);
    return errors::InvalidInput(reason);
  }
  const DirectoryFingerprint fp = FingerprintModelDirectory(dir);
  const std::string model_fp = config_json.has_value() ? absl::StrCat(fp.model, "|config=", *config_json) : fp.model;
  ModelRecord& record = records_[name];
  if (!explicit_request && record.looked && record.model_fingerprint == model_fp &&
      record.version_fingerprints == fp.versions) {
    return absl::OkStatus();  // nothing changed since the last look
  }
  record.looked = true;
  record.model_fingerprint = model_fp;
  record.version_fingerprints = fp.versions;

  // Parse the configuration and choose versions; each version is then normalized against its own
  // model file, so one corrupt version fails alone.
  config::RepositoryOptions parse_only = options_.repository_options;
  parse_only.read_signature = nullptr;
  config::RepositoryOptions with_signature = options_.repository_options;
  if (config_json.has_value()) {
    auto parsed = config::ParseModelConfigJson(*config_json, absl::StrCat(dir.string(), " (parameters.config)"));
    if (!parsed.ok()) {
      record.looked = false;  // the files were not looked at with this config
      return errors::InvalidInput(parsed.status().message());
    }
    parse_only.config_override = *parsed;
    with_signature.config_override = *std::move(parsed);
  }
  auto model = config::LoadRepositoryModel(dir, parse_only);
  if (!model.ok()) {
    spdlog::warn("model {}: cannot be loaded; what it serves is unchanged: {}", EscapeForLog(name),
                 EscapeForLog(std::string(model.status().message())));
    table_->Set(name, std::nullopt, ModelState::kUnavailable, std::string(model.status().message()));
    return errors::InvalidInput(model.status().message());
  }
  table_->Erase(name, std::nullopt);

  const std::vector<int64_t> served = manager_->Versions(name);
  auto is_served = [&served](int64_t v) { return std::find(served.begin(), served.end(), v) != served.end(); };
  std::set<int64_t> chosen;
  bool chosen_served = false;  // some chosen version serves after this pass
  absl::Status first_error;
  for (const config::ModelVersion& version : model->versions) {
    const int64_t v = version.version;
    chosen.insert(v);
    if (stopping() && !explicit_request) {  // shutting down (SIGTERM): start no further load
      chosen_served = chosen_served || is_served(v);
      continue;
    }
    auto vfp = fp.versions.find(v);
    const std::string stamp = absl::StrCat(model_fp, "#", vfp == fp.versions.end() ? "" : vfp->second);
    auto attempted = record.attempted.find(v);
    const bool unchanged = attempted != record.attempted.end() && attempted->second == stamp;
    if (unchanged && (is_served(v) || !explicit_request)) {
      chosen_served = chosen_served || is_served(v);
      continue;
    }
    record.attempted[v] = stamp;
    absl::Status s = LoadVersion(*model, version, with_signature, /*replace=*/is_served(v));
    chosen_served = chosen_served || s.ok() || is_served(v);
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  // Versions the configuration no longer chooses go once a chosen one serves in their place.
  for (int64_t v : served) {
    if (chosen.contains(v)) continue;
    if (chosen_served) {
      UnloadVersion(name, v, "no longer chosen by version_policy");
    } else {
      table_->Set(name, v, ModelState::kReady,
                  "kept serving: no version the configuration now chooses could be loaded");
    }
  }
  for (auto it = record.attempted.begin(); it != record.attempted.end();) {
    it = chosen.contains(it->first) ? std::next(it) : record.attempted.erase(it);
  }
  return first_error;
}

absl::Status ModelRepositoryController::LoadVersion(const config::RepositoryModel& model,
                                                    const config::ModelVersion& version,
                                                    const config::RepositoryOptions& repository_options,
                                                    bool replace) {
  const std::string& name = model.name;
  const int64_t v = version.version;
  table_->Set(name, v, replace ? ModelState::kReady : ModelState::kLoading,
              replace ? "reloading (its files changed); serving the previous load meanwhile" : "");
  ServingMetrics* metrics = options_.model.metrics;
  spdlog::info("model {} version {}: {} (on the controller's thread; requests are served meanwhile)", EscapeForLog(name), v,
               replace ? "reloading, its files changed" : "loading");
  const int64_t rss_before = ResidentBytes();
  const auto start = std::chrono::steady_clock::now();
  config::RepositoryModel for_version = model;
  absl::StatusOr<std::unique_ptr<ServedModel>> served = absl::UnknownError("not loaded");
  if (absl::Status s = config::NormalizeModelForVersion(version, repository_options, &for_version); !s.ok()) {
    served = s;
  } else {
    served = options_.factory(for_version, version, options_.model);
  }
  if (served.ok() && *served == nullptr) served = absl::InternalError("the model factory returned no model");
  absl::Status swapped = absl::OkStatus();
  int64_t rss_loaded = 0;
  if (served.ok()) {
    rss_loaded = ResidentBytes();
    swapped = replace ? manager_->Replace(*std::move(served)) : manager_->Add(*std::move(served));
  }
  const absl::Status status = served.ok() ? swapped : served.status();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (metrics != nullptr) {
    metrics->model_loads->WithLabels({name, std::to_string(v), status.ok() ? "success" : "failure"})->Increment();
  }
  if (!status.ok()) {
    const std::string message(status.message());
    spdlog::warn("model {} version {}: load failed after {:.0f} ms; {}: {}", EscapeForLog(name), v, ms,
                 replace ? "still serving its previous load" : "not served", EscapeForLog(message));
    if (replace) {
      table_->Set(name, v, ModelState::kReady, absl::StrCat("reload failed; serving the previous load: ", message));
    } else {
      table_->Set(name, v, ModelState::kUnavailable, message);
    }
    return errors::InvalidInput(absl::StrCat("failed to load model '", name, "' version ", v, ": ", message));
  }
  const int64_t rss_peak = PeakResidentBytes();
  if (metrics != nullptr) {
    metrics->model_load_rss->WithLabels({"before"})->Set(static_cast<double>(rss_before));
    metrics->model_load_rss->WithLabels({"loaded"})->Set(static_cast<double>(rss_loaded));
    metrics->model_load_rss->WithLabels({"process_peak"})->Set(static_cast<double>(rss_peak));
  }
  table_->Set(name, v, ModelState::kReady);
  spdlog::info("model {} version {}: {} in {:.0f} ms (warm-up included); RSS {:.0f} MiB before, {:.0f} MiB "
               "loaded{}; process peak so far {:.0f} MiB",
               EscapeForLog(name), v, replace ? "reloaded" : "loaded", ms, MiB(rss_before), MiB(rss_loaded),
               replace ? " beside the previous load, which now finishes its requests" : "", MiB(rss_peak));
  return absl::OkStatus();
}

void ModelRepositoryController::UnloadVersion(const std::string& name, int64_t version, const std::string& reason) {
  table_->Set(name, version, ModelState::kUnloading, reason);
  spdlog::info("model {} version {}: unloading ({}); it finishes its in-flight requests first", EscapeForLog(name),
               version, EscapeForLog(reason));
  if (absl::Status s = manager_->Remove(name, version); !s.ok()) {
    table_->Set(name, version, ModelState::kUnavailable, "unloaded");
  }
}

std::vector<ModelStateEntry> ModelRepositoryController::Index(bool ready_only) const {
  std::vector<ModelStateEntry> entries = table_->Snapshot();
  if (options_.mode != ModelControlMode::kNone) {
    std::set<std::string> known;
    for (const ModelStateEntry& e : entries) known.insert(e.name);
    if (auto names = ListModels(); names.ok()) {
      for (const std::string& name : *names) {
        if (!known.contains(name)) entries.push_back({name, std::nullopt, ModelState::kUnavailable, "not loaded"});
      }
    }
    std::sort(entries.begin(), entries.end(), [](const ModelStateEntry& a, const ModelStateEntry& b) {
      return std::tie(a.name, a.version) < std::tie(b.name, b.version);
    });
  }
  if (ready_only) {
    entries.erase(std::remove_if(entries.begin(), entries.end(),
                                 [](const ModelStateEntry& e) { return e.state != ModelState::kReady; }),
                  entries.end());
  }
  return entries;
}

}  // namespace tide::serving
