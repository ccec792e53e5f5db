#include "serving/model_state_table.h"

namespace tide::serving {

std::string_view ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kReady: return "READY";
    case ModelState::kLoading: return "LOADING";
    case ModelState::kUnloading: return "UNLOADING";
    case ModelState::kUnavailable: return "UNAVAILABLE";
  }
  return "UNAVAILABLE";
}

void ModelStateTable::Set(std::string_view name, std::optional<int64_t> version, ModelState state,
                          std::string reason) {
  absl::MutexLock lock(&mu_);
  entries_[Key(std::string(name), version)] = ModelStateEntry{std::string(name), version, state, std::move(reason)};
}

bool ModelStateTable::Transition(std::string_view name, std::optional<int64_t> version, ModelState from,
                                 ModelState to, std::string reason) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(Key(std::string(name), version));
  if (it == entries_.end() || it->second.state != from) return false;
  it->second.state = to;
  it->second.reason = std::move(reason);
  return true;
}

void ModelStateTable::Erase(std::string_view name, std::optional<int64_t> version) {
  absl::MutexLock lock(&mu_);
  entries_.erase(Key(std::string(name), version));
}

void ModelStateTable::EraseModel(std::string_view name) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.lower_bound(Key(std::string(name), std::nullopt));
  while (it != entries_.end() && it->first.first == name) it = entries_.erase(it);
}

std::optional<ModelStateEntry> ModelStateTable::Get(std::string_view name, std::optional<int64_t> version) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(Key(std::string(name), version));
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::vector<ModelStateEntry> ModelStateTable::Snapshot() const {
  absl::MutexLock lock(&mu_);
  std::vector<ModelStateEntry> out;
  out.reserve(entries_.size());
  for (const auto& [key, entry] : entries_) out.push_back(entry);
  return out;
}

}  // namespace tide::serving
