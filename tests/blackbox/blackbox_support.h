// tide::blackbox — what the black-box tests of `tide serve` share: where the binary and the shared
// assets are, temporary model repositories, the exported test model, child commands, JSON helpers,
// and the fixture of a suite that shares one server among its tests (SharedServerSuite).
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
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "http_client.h"
#include "nlohmann/json.hpp"
#include "server_process.h"
#include "wait_for.h"

namespace tide::blackbox {

// How a black-box test waits for a condition (tests/support/wait_for.h).
using tide::test_support::WaitFor;

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
// `seed` set: the same preset with other random weights (a model that ranks differently), cached
// as tiny-bert-seed-<seed>.
absl::StatusOr<std::filesystem::path> ExportedTinyBert(std::optional<int> seed = std::nullopt);
// The same for any preset of tools/export_model.py (e.g. the embedding model tiny-bert-embed),
// cached as <preset>[-seed-<seed>]; the entry has the export's own config.pbtxt.
absl::StatusOr<std::filesystem::path> ExportedPreset(const std::string& preset,
                                                     std::optional<int> seed = std::nullopt);

// Creates <repository>/<name>/1/model.onnx (a symlink to `model_file`), <name>/tokenizer.json (a
// copy) and, when `config_pbtxt` is set, <name>/config.pbtxt with that text.
absl::Status AddModel(const std::filesystem::path& repository, const std::string& name,
                      const std::filesystem::path& model_file, const std::filesystem::path& tokenizer_file,
                      std::optional<std::string> config_pbtxt);

// AddModel for the exported tiny-bert (ExportedTinyBert()): <repository>/<name> with `config_pbtxt`.
absl::Status AddTinyBert(const std::filesystem::path& repository, const std::string& name,
                         std::optional<std::string> config_pbtxt);

// A config.pbtxt for the exported tiny-bert: onnxruntime, max_batch_size 16, max_sequence_length 64
// (its position embeddings), then `extra` (more parameters or blocks).
std::string TinyBertConfig(const std::string& extra = "");

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

// Sum of every sample of Prometheus metric `name` (exposition text `text`) whose label block
// contains every string of `label_parts`, e.g. {R"(model="m")", R"(reason="cancelled")"}.
double MetricSum(const std::string& text, std::string_view name, const std::vector<std::string>& label_parts);

// One `tide serve` over a model repository made for it, in a scratch directory of its own.
// Start() never fails: its first error (laying out the repository, starting the server) is kept in
// error() and the server is then absent. Destruction stops the server (as StartTideServe's object
// does), then removes the scratch directory with the repository in it.
class SharedServer {
 public:
  SharedServer() = default;  // makes the scratch directory (Start reports when it could not)
  SharedServer(const SharedServer&) = delete;
  SharedServer& operator=(const SharedServer&) = delete;

  // Lays out the model repository with `populate`, which gets the path of the (not yet created)
  // repository <scratch>/repo, then starts `tide serve --model-repository <repository> <flags...>`.
  void Start(const std::function<absl::Status(const std::filesystem::path& repository)>& populate,
             const std::vector<std::string>& flags);

  const std::filesystem::path& scratch_dir() const { return scratch_.path(); }
  std::filesystem::path repository() const { return scratch_.path() / "repo"; }
  tide::testing::ServerProcess* process() const { return process_.get(); }  // null unless started
  const std::string& error() const { return error_; }                       // empty unless failed

 private:
  TempDir scratch_;  // declared first, so it is removed after the server has stopped
  std::string error_;
  std::unique_ptr<tide::testing::ServerProcess> process_;
};

// The fixture of a suite whose tests share one server (started once: a server loads and warms up
// its models for seconds). `Suite` is the fixture class itself (CRTP), so each suite has its own
// server; a fixture derived from `Suite` shares its statics and runs its own SetUpTestSuite /
// TearDownTestSuite pair, so it gets a fresh server, as gtest runs it as a separate suite.
//
// The suite's own SetUpTestSuite states only what is specific to it:
//   static void SetUpTestSuite() {
//     StartSharedServer([](const fs::path& repository) { return AddTinyBert(repository, "m", config); },
//                       {"--log-level", "warn"});
//   }
// A setup error fails every test of the suite in SetUp with that error; a failed test prints the
// server's stderr tail in TearDown. A fixture that overrides SetUp calls SharedServerSuite::SetUp()
// first and returns when HasFatalFailure().
template <typename Suite>
class SharedServerSuite : public ::testing::Test {
 protected:
  static void StartSharedServer(
      const std::function<absl::Status(const std::filesystem::path& repository)>& populate,
      const std::vector<std::string>& flags) {
    delete shared_;
    shared_ = new SharedServer();
    shared_->Start(populate, flags);
  }

  static void TearDownTestSuite() {
    delete shared_;
    shared_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(shared_, nullptr) << "the suite's SetUpTestSuite did not call StartSharedServer";
    ASSERT_TRUE(shared_->error().empty()) << "the suite's server did not start: " << shared_->error();
    ASSERT_NE(shared_->process(), nullptr);
  }

  void TearDown() override {
    ExpectNoErrorWithoutKind();
    if (HasFailure() && shared_ != nullptr && shared_->process() != nullptr) {
      std::cerr << "tide serve " << shared_->process()->Diagnostics() << "\n";
    }
  }

  // No error reached an edge without an error kind (common/error.h) during the test: the server
  // counts each in tide_errors_without_kind_total. Checked after every test of every suite whose
  // /metrics is open (a suite that needs a key for it, or has stopped its server, is not checked).
  static void ExpectNoErrorWithoutKind() {
    if (shared_ == nullptr || shared_->process() == nullptr || !shared_->process()->IsRunning()) return;
    const tide::testing::ClientResponse metrics = NewClient(std::chrono::milliseconds(10000))->Get("/metrics");
    if (metrics.status != 200) return;
    constexpr std::string_view kName = "\ntide_errors_without_kind_total ";
    const size_t at = metrics.body.find(kName);
    ASSERT_NE(at, std::string::npos) << "/metrics has no tide_errors_without_kind_total";
    const size_t begin = at + kName.size();
    EXPECT_EQ(metrics.body.substr(begin, metrics.body.find('\n', begin) - begin), "0")
        << "an error without an error kind reached an edge (answered 500); see the server's log";
  }

  // The running server; only valid in tests (SetUp has checked that it runs).
  static tide::testing::ServerProcess& server() { return *shared_->process(); }
  // A directory for the suite's other files (`populate` may use it too), removed after the suite;
  // the repository is in it.
  static const std::filesystem::path& scratch_dir() { return shared_->scratch_dir(); }

  // A client of the running server (connects on its first request).
  static std::unique_ptr<tide::testing::HttpClient> NewClient(
      std::chrono::milliseconds timeout = std::chrono::milliseconds(60000)) {
    return std::make_unique<tide::testing::HttpClient>(server().host(), server().port(), timeout);
  }

 private:
  static inline SharedServer* shared_ = nullptr;
};

}  // namespace tide::blackbox
