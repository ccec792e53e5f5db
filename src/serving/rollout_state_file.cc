#include "serving/rollout_state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "nlohmann/json.hpp"
#include "serving/rollout_json.h"

namespace tide::serving {
namespace {

using json = nlohmann::json;

std::optional<RolloutState> ParseState(std::string_view name) {
  for (RolloutState s : {RolloutState::kIdle, RolloutState::kRunning, RolloutState::kPromoted, RolloutState::kRolledBack}) {
    if (RolloutStateName(s) == name) return s;
  }
  return std::nullopt;
}

absl::Status SysError(std::string_view what, const std::string& path) {
  return errors::Internal(absl::StrCat(std::string(what), " ", path, ": ", std::strerror(errno)));
}

}  // namespace

std::string RolloutStateJson(const std::vector<SavedRollout>& rollouts) {
  json all = json::object();
  for (const SavedRollout& r : rollouts) {
    all[r.model] = {{"rollout", RolloutSpecToJson(r.spec)},
                    {"state", std::string(RolloutStateName(r.state))},
                    {"reason", r.reason},
                    {"promoted_from", r.promoted_from}};
  }
  return json{{"version", 1}, {"rollouts", all}}.dump(2) + "\n";
}

absl::StatusOr<std::vector<SavedRollout>> ParseRolloutState(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return errors::InvalidInput("the rollout state is not a JSON object");
  if (j.value("version", 0) != 1) return errors::InvalidInput("the rollout state's version must be 1");
  auto all = j.find("rollouts");
  if (all == j.end() || !all->is_object()) return errors::InvalidInput("the rollout state has no \"rollouts\" object");
  std::vector<SavedRollout> out;
  for (const auto& [model, entry] : all->items()) {
    auto bad = [&](const std::string& what) {
      return errors::InvalidInput(absl::StrCat("rollout state of model ", model, ": ", what));
    };
    if (!entry.is_object() || !entry.contains("rollout")) return bad("no \"rollout\"");
    auto declaration = ParseRolloutJson(entry["rollout"].dump());
    if (!declaration.ok()) return bad(std::string(declaration.status().message()));
    if (!declaration->stable.has_value()) return bad("no stable version");
    SavedRollout r;
    r.model = model;
    r.spec = declaration->spec;
    auto state = entry.contains("state") && entry["state"].is_string()
                     ? ParseState(entry["state"].get<std::string>())
                     : std::nullopt;
    if (!state.has_value()) return bad("state must be idle, running, promoted or rolled_back");
    r.state = *state;
    if (auto it = entry.find("reason"); it != entry.end()) {
      if (!it->is_string()) return bad("reason must be a string");
      r.reason = it->get<std::string>();
    }
    if (auto it = entry.find("promoted_from"); it != entry.end()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 0) return bad("promoted_from must be a version");
      r.promoted_from = it->get<int64_t>();
    }
    out.push_back(std::move(r));
  }
  return out;
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view text) {
  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  // A fresh, unpredictable name made with O_CREAT | O_EXCL (mkstemp): whoever can write the folder
  // cannot plant a symlink at the temporary name for tide to write through.
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return SysError("cannot create a temporary file like", tmp);
  auto fail = [&](std::string_view what, bool close_fd) {
    absl::Status s = SysError(what, tmp);
    if (close_fd) ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  // mkstemp makes the file 0600; keep the mode of the file it replaces (0600 for a new one).
  if (struct stat st; ::stat(path.c_str(), &st) == 0 && ::fchmod(fd, st.st_mode & 07777) != 0) {
    return fail("cannot chmod", true);
  }
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("cannot write", true);
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("cannot fsync", true);
  if (::close(fd) != 0) return fail("cannot close", false);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = SysError("cannot rename onto", path);
    ::unlink(tmp.c_str());
    return s;
  }
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);  // the rename itself; best effort (some file systems refuse a folder fsync)
    ::close(dfd);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> ReadFileIfExists(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && !ec) return std::optional<std::string>();
  std::ifstream in(path, std::ios::binary);
  if (!in) return SysError("cannot read", path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return SysError("cannot read", path);
  return std::optional<std::string>(ss.str());
}

}  // namespace tide::serving
