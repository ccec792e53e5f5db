// tide::serving model directories — what the repository controller sees when it looks at a
// Triton-style model repository: which entries are models, and a fingerprint of a model's files
// that changes whenever a file the model is loaded from changes (poll mode's reload trigger).
//
// Contract:
//  - IsModelName: one plain directory name (no path separator, no leading '.', not "." or "..",
//    no NUL): what a request path may name.
//  - ListModelDirectories: every model directory of `repository`, sorted. NOT_FOUND when it is not
//    a directory; INTERNAL when it cannot be listed.
//  - FingerprintModelDirectory: the top-level files of a model (config.pbtxt, tokenizer.json, ...)
//    and each numeric version folder's files (recursively, through symlinked folders), each as
//    "path=size:mtime[->link target]", sorted; hidden entries skipped. Never fails: what vanished
//    while it looked is left out (the next look sees the change).
//  - Free functions over the filesystem; no shared state; thread-compatible.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tide::serving {

bool IsModelName(std::string_view name);

absl::StatusOr<std::vector<std::string>> ListModelDirectories(const std::filesystem::path& repository);

// What one look at a model directory found.
struct DirectoryFingerprint {
  std::string model;                     // its top-level files
  std::map<int64_t, std::string> versions;  // each version folder's files
};
DirectoryFingerprint FingerprintModelDirectory(const std::filesystem::path& model_dir);

}  // namespace tide::serving
