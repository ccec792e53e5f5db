// tide::blackbox — what the black-box tests of `tide serve` share: where the binary and the shared
// assets are, temporary model repositories, the exported test model, child commands, JSON helpers.
//
// Contract:
//  - Paths come from the environment tide_add_test sets (TIDE_SOURCE_DIR, TIDE_BINARY_DIR); the
//    fallbacks are the working directory and ./build.
//  - ExportedTinyBert() exports tools/export_model.py's `tiny-bert` preset (seeded random weights,
//    generated WordPiece tokenizer, verified with ONNX Runtime by the export tool itself through
//    `tide verify-model`) once into <binary dir>/blackbox_models and reuses it while the export
//    tools are unchanged; concurrent test binaries serialise the export with flock.
//  - Functions block (file and process I/O) and are not meant to be called from several threads
//    at once, except the JSON helpers, which are pure.
//  - Errors come back as absl::Status with the failing command's output in the message.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server_process.h"

namespace tide::blackbox {

std::filesystem::path SourceDir();
std::filesystem::path BinaryDir();
std::filesystem::path TideBinary();  // <binary dir>/tide
// ../shared/assets next to the source tree, or nullopt when this checkout has none.
std::optional<std::filesystem::path> SharedAssets();

// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A model entry of the exported tiny-bert: <dir>/1/model.onnx, <dir>/tokenizer.json.
absl::StatusOr<std::filesystem::path> ExportedTinyBert();

// Creates <repository>/<name>/1/model.onnx (a symlink to `model_file`), <name>/tokenizer.json (a
// copy) and, when `config_pbtxt` is set, <name>/config.pbtxt with that text.
absl::Status AddModel(const std::filesystem::path& repository, const std::string& name,
                      const std::filesystem::path& model_file, const std::filesystem::path& tokenizer_file,
                      std::optional<std::string> config_pbtxt);

// AddModel for the exported tiny-bert (ExportedTinyBert()): <repository>/<name> with `config_pbtxt`.
absl::Status AddTinyBert(const std::filesystem::path& repository, const std::string& name,
                         std::optional<std::string> config_pbtxt);

// Starts `tide serve --model-repository <repository> <args...> --port 0` and returns once it
// printed its "listening" line (every model loaded and warmed up; up to `startup_timeout`, generous
// because the machine running the tests may be loaded). The process is stopped (SIGTERM, then
// SIGKILL) when the returned object is destroyed.
absl::StatusOr<std::unique_ptr<tide::testing::ServerProcess>> StartTideServe(
    const std::filesystem::path& repository, const std::vector<std::string>& args,
    std::chrono::milliseconds startup_timeout = std::chrono::milliseconds(120000));

struct CommandResult {
  int exit_code = -1;  // 128+N when killed by signal N
  std::string output;  // stdout and stderr together
};
// Runs argv[0] with `stdin_text` on its standard input, waits for it, and returns its output.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, std::string_view stdin_text = {});

// Parses `text`; a value that is_discarded() when it is not JSON.
nlohmann::json ParseJson(std::string_view text);

double Sigmoid(double x);

}  // namespace tide::blackbox
