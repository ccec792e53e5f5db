// tide::serving rollout state file — the rollouts started through the API, kept across restarts
// (`tide serve --rollout-state-file PATH`).
//
// Contract:
//  - RolloutStateJson renders every saved rollout; ParseRolloutState reads it back (each rollout's
//    spec in ParseRolloutJson's format with `stable` set, plus its state, reason and the stable
//    version a promotion replaced):
//      {"version": 1, "rollouts": {"m": {"rollout": {...}, "state": "running"|"promoted"|"rolled_back"|"idle",
//                                        "reason": "...", "promoted_from": 0}}}
//    A file that is not this format is kInvalidInput naming what is wrong (tide then refuses to
//    start rather than forget rollouts silently).
//  - WriteFileAtomically writes `text` to a temporary file beside `path`, fsyncs it, renames it
//    over `path` and fsyncs the folder: a reader (or a crash) sees the old file or the new one,
//    never a mix. The temporary file gets a random name and is created with O_EXCL (mkstemp),
//    so a symlink or file planted in the folder is never written through; it keeps the replaced
//    file's mode (0600 for a new one) and is removed on failure. Errors: kInternal with the errno
//    text and the path.
//  - ReadFileIfExists: the file's text; nullopt when it does not exist; kInternal otherwise.
//  - Pure functions apart from the file system; thread-safe for different paths.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "serving/rollout.h"

namespace tide::serving {

struct SavedRollout {
  std::string model;
  RolloutSpec spec;
  RolloutState state = RolloutState::kRunning;
  std::string reason;
  int64_t promoted_from = 0;
};

std::string RolloutStateJson(const std::vector<SavedRollout>& rollouts);
absl::StatusOr<std::vector<SavedRollout>> ParseRolloutState(std::string_view text);

absl::Status WriteFileAtomically(const std::string& path, std::string_view text);
absl::StatusOr<std::optional<std::string>> ReadFileIfExists(const std::string& path);

}  // namespace tide::serving
