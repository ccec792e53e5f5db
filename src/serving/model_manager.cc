#include "serving/model_manager.h"

#include "common/error.h"

#include <charconv>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "common/error_echo.h"
#include "spdlog/spdlog.h"

namespace tide::serving {

// Models retired but not yet destroyed. The deleter of every model the manager owns holds this
// state, so a release after the manager is gone still finds it.
struct ModelManager::Retirements {
  std::mutex mu;
  std::condition_variable cv;
  std::unordered_set<const ServedModel*> retired;  // replaced or removed, still held somewhere
  size_t in_progress = 0;                           // retirements being shut down right now
  std::function<void(const std::string&, int64_t)> on_retired;  // SetRetiredCallback
};

ModelManager::ModelManager() : retirements_(std::make_shared<Retirements>()) {}

std::shared_ptr<ServedModel> ModelManager::Own(std::unique_ptr<ServedModel> model) {
  return std::shared_ptr<ServedModel>(model.release(), [state = retirements_](ServedModel* m) {
    {
      std::lock_guard<std::mutex> lock(state->mu);
      if (state->retired.erase(m) == 0) {
        delete m;  // the manager's own end: not retired, released by ~ModelManager's map
        return;
      }
      ++state->in_progress;
    }
    // The last holder may be an instance thread (its request's callback) or the deadline timer:
    // the model's destructor joins those, so it runs on a thread of its own.
    std::thread([state, m, name = m->name(), version = m->version()] {
      delete m;  // ~ServedModel: Shutdown (drain within shutdown_grace), then join its threads
      std::function<void(const std::string&, int64_t)> on_retired;
      {
        std::lock_guard<std::mutex> lock(state->mu);
        on_retired = state->on_retired;
      }
      if (on_retired) on_retired(name, version);
      std::lock_guard<std::mutex> lock(state->mu);
      --state->in_progress;
      state->cv.notify_all();
    }).detach();
  });
}

void ModelManager::Retire(std::shared_ptr<ServedModel> model) {
  if (model == nullptr) return;
  spdlog::info("model {} version {}: retired; shuts down when its last request finishes", EscapeForLog(model->name()),
               model->version());
  {
    std::lock_guard<std::mutex> lock(retirements_->mu);
    retirements_->retired.insert(model.get());
  }
  model.reset();  // if nothing else holds it, the deleter retires it now
}

void ModelManager::SetRetiredCallback(std::function<void(const std::string& name, int64_t version)> callback) {
  std::lock_guard<std::mutex> lock(retirements_->mu);
  retirements_->on_retired = std::move(callback);
}

std::unique_ptr<ModelManager> ModelManager::Create(ServingMetrics* metrics) {
  std::unique_ptr<ModelManager> manager(new ModelManager());
  manager->metrics_ = metrics;
  return manager;
}

absl::Status ModelManager::Add(std::unique_ptr<ServedModel> model) {
  if (model == nullptr) return absl::InvalidArgumentError("ModelManager::Add: no model");
  absl::MutexLock lock(&mu_);
  auto& versions = models_[model->name()];
  if (versions.contains(model->version())) {
    return absl::AlreadyExistsError(absl::StrCat("model '", model->name(), "' version ", model->version(),
                                                 " is already served"));
  }
  const int64_t version = model->version();
  versions[version] = Own(std::move(model));
  return absl::OkStatus();
}

absl::Status ModelManager::Replace(std::unique_ptr<ServedModel> model) {
  if (model == nullptr) return absl::InvalidArgumentError("ModelManager::Replace: no model");
  std::shared_ptr<ServedModel> old;
  {
    absl::MutexLock lock(&mu_);
    auto it = models_.find(model->name());
    auto vit = it == models_.end() ? decltype(it->second.end()){} : it->second.find(model->version());
    if (it == models_.end() || vit == it->second.end()) {
      return errors::NotFound(absl::StrCat("model '", EchoForError(model->name()), "' has no version ",
                                              model->version(), " to replace"));
    }
    old = std::exchange(vit->second, Own(std::move(model)));
  }
  Retire(std::move(old));
  return absl::OkStatus();
}

absl::Status ModelManager::Remove(std::string_view name, int64_t version) {
  std::shared_ptr<ServedModel> old;
  {
    absl::MutexLock lock(&mu_);
    auto it = models_.find(name);
    auto vit = it == models_.end() ? decltype(it->second.end()){} : it->second.find(version);
    if (it == models_.end() || vit == it->second.end()) {
      return errors::NotFound(absl::StrCat("model '", EchoForError(name), "' has no version ", version));
    }
    old = std::move(vit->second);
    it->second.erase(vit);
    if (it->second.empty()) models_.erase(it);
  }
  Retire(std::move(old));
  return absl::OkStatus();
}

ModelManager::~ModelManager() {
  Shutdown();
  {
    absl::MutexLock lock(&mu_);
    models_.clear();
  }
  // Retired models still held elsewhere are not waited for; those shutting down now are.
  std::unique_lock<std::mutex> lock(retirements_->mu);
  retirements_->cv.wait(lock, [this] { return retirements_->in_progress == 0; });
}

absl::StatusOr<std::shared_ptr<ServedModel>> ModelManager::Find(std::string_view name,
                                                                std::string_view version) const {
  absl::MutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end() || it->second.empty()) {
    return errors::NotFound(absl::StrCat("model '", EchoForError(name), "' is not served here"));
  }
  if (version.empty()) return it->second.rbegin()->second;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(version.data(), version.data() + version.size(), v);
  auto vit = ec == std::errc() && ptr == version.data() + version.size() ? it->second.find(v) : it->second.end();
  if (vit == it->second.end()) {
    return errors::NotFound(absl::StrCat("model '", EchoForError(name), "' has no version '", EchoForError(version), "'"));
  }
  return vit->second;
}

absl::StatusOr<std::shared_ptr<ServedModel>> ModelManager::Default() const {
  absl::MutexLock lock(&mu_);
  for (const auto& [name, versions] : models_) {
    if (!versions.empty()) return versions.rbegin()->second;
  }
  return errors::NotFound("no model is loaded");
}

std::vector<std::shared_ptr<ServedModel>> ModelManager::All() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<ServedModel>> all;
  for (const auto& [name, versions] : models_) {
    for (const auto& [v, model] : versions) all.push_back(model);
  }
  return all;
}

std::vector<int64_t> ModelManager::Versions(std::string_view name) const {
  absl::MutexLock lock(&mu_);
  std::vector<int64_t> out;
  auto it = models_.find(name);
  if (it == models_.end()) return out;
  for (const auto& [v, model] : it->second) out.push_back(v);
  return out;
}

bool ModelManager::AllReady() const {
  for (const auto& model : All()) {
    if (!model->ready()) return false;
  }
  return true;
}

void ModelManager::RefreshMetrics() const {
  if (metrics_ == nullptr) return;
  absl::MutexLock refresh_lock(&refresh_mu_);
  for (const auto& model : All()) {
    const ServedModel::Stats s = model->GetStats();
    const std::string& n = model->name();
    const std::string v = std::to_string(model->version());
    // A version replaced in place (hot reload) shares its labels with its successor, and the old
    // one's Shutdown sets the gauge to 0 after the new one set 1: the served one says last.
    metrics_->model_ready->WithLabels({n, v})->Set(model->ready() ? 1 : 0);
    metrics_->queue_tasks->WithLabels({n, v})->Set(static_cast<double>(s.batcher.queued_tasks));
    metrics_->queue_tokens->WithLabels({n, v})->Set(static_cast<double>(s.batcher.queued_tokens));
    metrics_->padding_ratio->WithLabels({n, v})->Set(
        s.batcher.real_tokens == 0 ? 1.0 : static_cast<double>(s.batcher.padded_tokens) / s.batcher.real_tokens);
    for (size_t i = 0; i < s.instances.size(); ++i) {
      metrics_->instance_busy_ratio->WithLabels({n, v, std::to_string(i)})->Set(s.instances[i].busy_ratio);
    }
    // Counters mirror the batcher's monotonic counts: add what is new since the last scrape.
    auto mirror = [](metrics::Counter* c, uint64_t total) {
      const double delta = static_cast<double>(total) - c->Value();
      if (delta > 0) c->Increment(delta);
    };
    mirror(metrics_->rejected->WithLabels({n, v, "queue_full"}), s.batcher.rejected_queue_full);
    mirror(metrics_->rejected->WithLabels({n, v, "invalid"}), s.batcher.rejected_invalid);
    uint64_t isolation_runs = 0;
    for (const batching::InstanceStats& in : s.instances) isolation_runs += in.isolation_runs;
    mirror(metrics_->isolation_runs->WithLabels({n, v}), isolation_runs);
    for (size_t r = 0; r < batching::kDropReasonCount; ++r) {
      const auto reason = static_cast<batching::DropReason>(r);
      mirror(metrics_->dropped->WithLabels({n, v, std::string(batching::DropReasonName(reason))}),
             s.batcher.dropped_by(reason));
    }
  }
}

void ModelManager::Shutdown() {
  for (const auto& model : All()) model->Shutdown();
}

void ModelManager::Shutdown(std::chrono::steady_clock::time_point deadline) {
  for (const auto& model : All()) model->Shutdown(deadline);
}

}  // namespace tide::serving
