// Unit tests of the repository controller (model control modes poll and explicit) over a real
// directory tree with fake model files: the signature reader and the model factory are injected,
// so "model.onnx" is a few bytes ("ok", "corrupt"), and the served versions run on fake backends
// (serving/testing/fake_backend.h).
// Polls are called directly (no controller thread, no sleeps); an unload's end is awaited through
// the on_unloaded hook.
#include "serving/model_repository_controller.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "serving/model_loader.h"
#include "serving/testing/fake_backend.h"
#include "tokenizer/testing/small_bert_tokenizer.h"

namespace tide::serving {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ResultOr = absl::StatusOr<InferenceResult>;
constexpr absl::Duration kHang = absl::Seconds(30);  // generous bound for hangs only

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    root_ = fs::temp_directory_path() / ("tide_controller_test_" + std::to_string(rd()));
    fs::create_directories(root_);
    manager_ = ModelManager::Create();
  }
  void TearDown() override {
    controller_.reset();
    manager_.reset();
    fs::remove_all(root_);
  }

  void Write(const fs::path& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }

  ModelRepositoryControllerOptions Options(ModelControlMode mode) {
    ModelRepositoryControllerOptions o;
    o.mode = mode;
    o.repository = root_;
    o.run_thread = false;
    o.model.shutdown_grace = std::chrono::milliseconds(5000);
    // A "model file" holding "corrupt" is not an ONNX model (as ReadSignature would say).
    o.repository_options.read_signature = [](const fs::path& file) -> absl::StatusOr<ModelSignature> {
      if (ReadFile(file) == "corrupt") return absl::InvalidArgumentError(file.string() + ": not an ONNX model");
      ModelSignature s;
      s.num_labels = 1;
      return s;
    };
    // The loader's part: a missing tokenizer fails like LoadModel does; else a fake-backed version.
    o.factory = [this](const config::RepositoryModel& model, const config::ModelVersion& version,
                       const ServedModelOptions& options) -> absl::StatusOr<std::unique_ptr<ServedModel>> {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++loads_[{model.name, version.version}];
        max_batch_size_[model.name] = model.config.max_batch_size();
      }
      if (!fs::exists(model.directory / "tokenizer.json")) {
        return absl::NotFoundError((model.directory / "tokenizer.json").string() + ": cannot open");
      }
      auto loaded = std::make_shared<LoadedModel>();
      loaded->name = model.name;
      loaded->version = version.version;
      loaded->config_file = model.config_file.string();
      loaded->config = model.config;
      loaded->tokenizer = tokenizer::testing::SmallBertTokenizer({"a", "b"});
      loaded->signature.num_labels = 1;
      loaded->max_sequence_length = 16;
      loaded->token_input_limits.vocab_size = 10;
      return ServedModel::Create(std::move(loaded), testing::Fake(gate_), options);
    };
    o.on_unloaded = [this](const std::string& name, int64_t version) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = unloaded_.find({name, version});
      if (it != unloaded_.end() && !it->second->HasBeenNotified()) it->second->Notify();
    };
    return o;
  }

  // The notification an unload of (name, version) will give; call before the unload.
  absl::Notification* ExpectUnload(const std::string& name, int64_t version) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& n = unloaded_[{name, version}];
    n = std::make_unique<absl::Notification>();
    return n.get();
  }

  void Start(ModelRepositoryControllerOptions o) {
    auto c = ModelRepositoryController::Create(manager_.get(), std::move(o));
    ASSERT_TRUE(c.ok()) << c.status();
    controller_ = *std::move(c);
    ASSERT_TRUE(controller_->Start().ok());
  }

  // A model entry: tokenizer, optional config, versions with model file content `file`.
  void AddModel(const std::string& name, std::vector<int64_t> versions, const std::string& config = "") {
    Write(name + "/tokenizer.json", "{}");
    if (!config.empty()) Write(name + "/config.pbtxt", config);
    for (int64_t v : versions) Write(name + "/" + std::to_string(v) + "/model.onnx", "ok");
  }

  int Loads(const std::string& name, int64_t version) {
    std::lock_guard<std::mutex> lock(mu_);
    return loads_[{name, version}];
  }

  std::optional<ModelStateEntry> Entry(const std::string& name, std::optional<int64_t> version) {
    for (const ModelStateEntry& e : controller_->Index()) {
      if (e.name == name && e.version == version) return e;
    }
    return std::nullopt;
  }

  ModelState State(const std::string& name, std::optional<int64_t> version) {
    auto e = Entry(name, version);
    EXPECT_TRUE(e.has_value()) << name << " " << version.value_or(-1) << " is not in the index";
    return e.has_value() ? e->state : ModelState::kUnavailable;
  }

  int64_t ServedVersion(const std::string& name) {
    auto m = manager_->Find(name);
    return m.ok() ? (*m)->version() : -1;
  }

  fs::path root_;
  std::unique_ptr<ModelManager> manager_;
  std::unique_ptr<ModelRepositoryController> controller_;
  // Every batch answers 1.0; while armed, a batch waits for `gate` (a request in flight).
  std::shared_ptr<testing::BackendControl> gate_ = std::make_shared<testing::BackendControl>();
  std::mutex mu_;
  std::map<std::pair<std::string, int64_t>, int> loads_;
  std::map<std::string, int> max_batch_size_;
  std::map<std::pair<std::string, int64_t>, std::unique_ptr<absl::Notification>> unloaded_;
};

TEST(ModelControlMode, ParsesTritonNames) {
  EXPECT_EQ(*ParseModelControlMode("none"), ModelControlMode::kNone);
  EXPECT_EQ(*ParseModelControlMode("poll"), ModelControlMode::kPoll);
  EXPECT_EQ(*ParseModelControlMode("explicit"), ModelControlMode::kExplicit);
  EXPECT_FALSE(ParseModelControlMode("POLL").ok());
  EXPECT_EQ(ModelControlModeName(ModelControlMode::kExplicit), "explicit");
}

TEST_F(ControllerTest, CreateRefusesInconsistentOptions) {
  auto o = Options(ModelControlMode::kPoll);
  o.startup_models = {"m"};
  EXPECT_THAT(ModelRepositoryController::Create(manager_.get(), o).status().message(), HasSubstr("--load-model"));
  o = Options(ModelControlMode::kExplicit);
  o.repository.clear();
  EXPECT_FALSE(ModelRepositoryController::Create(manager_.get(), o).ok());
  // The factory and the signature reader are the composition root's: never a default backend.
  for (int which = 0; which < 2; ++which) {
    o = Options(ModelControlMode::kNone);
    if (which == 0) o.factory = nullptr;
    if (which == 1) o.repository_options.read_signature = nullptr;
    EXPECT_THAT(ModelRepositoryController::Create(manager_.get(), o).status().message(), HasSubstr("composition root"));
  }
}

// Mode none is the same driver: Start loads every version of every model once, through the
// injected factory, lists them READY, and nothing changes afterwards (no poll, no load, no unload).
TEST_F(ControllerTest, ModeNoneLoadsTheWholeRepositoryOnceThroughTheFactory) {
  AddModel("a", {1, 2}, "version_policy { all { } }\n");
  AddModel("b", {3});
  Start(Options(ModelControlMode::kNone));
  EXPECT_EQ(manager_->Versions("a"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(manager_->Versions("b"), std::vector<int64_t>{3});
  EXPECT_EQ(Loads("a", 1) + Loads("a", 2) + Loads("b", 3), 3);
  EXPECT_EQ(State("a", 2), ModelState::kReady);
  EXPECT_EQ(State("b", 3), ModelState::kReady);
  EXPECT_EQ(controller_->Poll().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(KindOf(controller_->Load("b")), ErrorKind::kForbidden);
  EXPECT_EQ(KindOf(controller_->Unload("b")), ErrorKind::kForbidden);
  AddModel("c", {1});  // appears later: mode none never looks again
  EXPECT_EQ(controller_->Poll().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(manager_->Versions("c").empty());
}

// Mode none refuses to start on a bad model anywhere (before building any), and with nothing to serve.
TEST_F(ControllerTest, ModeNoneFailsStartOnABadModelOrAnEmptyRepository) {
  {
    auto c = ModelRepositoryController::Create(manager_.get(), Options(ModelControlMode::kNone));
    ASSERT_TRUE(c.ok());
    EXPECT_EQ((*c)->Start().code(), absl::StatusCode::kNotFound);  // no models
  }
  AddModel("good", {1});
  AddModel("bad", {1}, "max_batch_size: many\n");
  auto c = ModelRepositoryController::Create(manager_.get(), Options(ModelControlMode::kNone));
  ASSERT_TRUE(c.ok());
  EXPECT_THAT((*c)->Start().message(), HasSubstr("config.pbtxt:1:"));
  EXPECT_EQ(Loads("good", 1), 0);  // the whole repository is checked before anything is built
  EXPECT_TRUE(manager_->All().empty());
}

// Poll: a new version is served in place of the old one (latest policy), then removing it brings
// the old one back; each swap only after the new version is loaded.
TEST_F(ControllerTest, PollPicksUpANewVersionThenARemovedOne) {
  AddModel("m", {1});
  Start(Options(ModelControlMode::kPoll));
  EXPECT_EQ(ServedVersion("m"), 1);
  EXPECT_EQ(State("m", 1), ModelState::kReady);

  EXPECT_TRUE(controller_->Poll().ok());  // nothing changed: nothing loads
  EXPECT_EQ(Loads("m", 1), 1);

  auto v1 = manager_->Find("m");  // a request holding version 1
  ASSERT_TRUE(v1.ok());
  absl::Notification* v1_gone = ExpectUnload("m", 1);
  Write("m/2/model.onnx", "ok");
  EXPECT_TRUE(controller_->Poll().ok());
  EXPECT_EQ(ServedVersion("m"), 2);
  EXPECT_EQ(manager_->Versions("m"), std::vector<int64_t>{2});
  EXPECT_EQ(State("m", 2), ModelState::kReady);
  EXPECT_EQ(State("m", 1), ModelState::kUnloading);  // still held
  v1->reset();
  ASSERT_TRUE(v1_gone->WaitForNotificationWithTimeout(kHang));
  EXPECT_EQ(State("m", 1), ModelState::kUnavailable);
  EXPECT_EQ(Entry("m", 1)->reason, "unloaded");

  absl::Notification* v2_gone = ExpectUnload("m", 2);
  fs::remove_all(root_ / "m" / "2");
  EXPECT_TRUE(controller_->Poll().ok());
  EXPECT_EQ(ServedVersion("m"), 1);
  EXPECT_EQ(Loads("m", 1), 2);
  ASSERT_TRUE(v2_gone->WaitForNotificationWithTimeout(kHang));
  EXPECT_EQ(State("m", 1), ModelState::kReady);
  EXPECT_EQ(State("m", 2), ModelState::kUnavailable);

  // ready: true lists only what serves.
  std::vector<ModelStateEntry> ready = controller_->Index(/*ready_only=*/true);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].version, 1);
}

TEST_F(ControllerTest, PollReloadsAChangedVersionOrEveryVersionForAChangedConfig) {
  AddModel("m", {1, 2}, "version_policy { all { } }\n");
  Start(Options(ModelControlMode::kPoll));
  EXPECT_EQ(manager_->Versions("m"), (std::vector<int64_t>{1, 2}));
  auto before = manager_->Find("m", "1");
  ASSERT_TRUE(before.ok());

  Write("m/1/model.onnx", "ok, re-exported");  // another size: a changed file
  EXPECT_TRUE(controller_->Poll().ok());
  EXPECT_EQ(Loads("m", 1), 2);
  EXPECT_EQ(Loads("m", 2), 1);
  auto after = manager_->Find("m", "1");
  ASSERT_TRUE(after.ok());
  EXPECT_NE(before->get(), after->get());  // swapped; the holder keeps the old one
  EXPECT_EQ(State("m", 1), ModelState::kReady);
  before->reset();

  Write("m/config.pbtxt", "version_policy { all { } }\nmax_batch_size: 4\n");
  EXPECT_TRUE(controller_->Poll().ok());
  EXPECT_EQ(Loads("m", 1), 3);
  EXPECT_EQ(Loads("m", 2), 2);
  EXPECT_EQ(max_batch_size_["m"], 4);
}

// A corrupt new version leaves the previous one serving, shows why, and is not retried until its
// files change.
TEST_F(ControllerTest, CorruptNewVersionLeavesThePreviousOneServing) {
  AddModel("m", {1});
  Start(Options(ModelControlMode::kPoll));
  Write("m/2/model.onnx", "corrupt");
  absl::Status s = controller_->Poll();
  EXPECT_EQ(KindOf(s), ErrorKind::kInvalidInput);
  EXPECT_EQ(ServedVersion("m"), 1);
  EXPECT_EQ(State("m", 1), ModelState::kReady);
  EXPECT_THAT(Entry("m", 1)->reason, HasSubstr("kept serving"));
  EXPECT_EQ(State("m", 2), ModelState::kUnavailable);
  EXPECT_THAT(Entry("m", 2)->reason, HasSubstr("2/model.onnx: not an ONNX model"));

  EXPECT_TRUE(controller_->Poll().ok());  // unchanged: not retried
  EXPECT_EQ(Loads("m", 2), 0);            // (it failed before the factory)

  Write("m/2/model.onnx", "ok");
  EXPECT_TRUE(controller_->Poll().ok());
  EXPECT_EQ(ServedVersion("m"), 2);
  EXPECT_EQ(State("m", 2), ModelState::kReady);
}

TEST_F(ControllerTest, FailedReloadKeepsServingThePreviousLoad) {
  AddModel("m", {1});
  Start(Options(ModelControlMode::kPoll));
  auto before = manager_->Find("m");
  fs::remove(root_ / "m" / "tokenizer.json");  // the loader will miss it
  Write("m/1/model.onnx", "ok, re-exported");
  EXPECT_FALSE(controller_->Poll().ok());
  auto after = manager_->Find("m");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(before->get(), after->get());
  EXPECT_EQ(State("m", 1), ModelState::kReady);
  EXPECT_THAT(Entry("m", 1)->reason, HasSubstr("reload failed; serving the previous load: "));
  EXPECT_THAT(Entry("m", 1)->reason, HasSubstr("tokenizer.json"));
}

TEST_F(ControllerTest, BadConfigKeepsTheModelServingAndShowsTheField) {
  AddModel("m", {1});
  Start(Options(ModelControlMode::kPoll));
  Write("m/config.pbtxt", "max_batch_size: many\n");
  EXPECT_FALSE(controller_->Poll().ok());
  EXPECT_EQ(ServedVersion("m"), 1);
  EXPECT_EQ(State("m", std::nullopt), ModelState::kUnavailable);
  EXPECT_THAT(Entry("m", std::nullopt)->reason, HasSubstr("config.pbtxt:1:"));
  EXPECT_EQ(State("m", 1), ModelState::kReady);
  fs::remove(root_ / "m" / "config.pbtxt");
  EXPECT_TRUE(controller_->Poll().ok());
  EXPECT_FALSE(Entry("m", std::nullopt).has_value());
}

TEST_F(ControllerTest, PollUnloadsAModelWhoseDirectoryIsGoneAndLoadsANewModel) {
  AddModel("a", {1});
  Start(Options(ModelControlMode::kPoll));
  absl::Notification* a_gone = ExpectUnload("a", 1);
  fs::remove_all(root_ / "a");
  AddModel("b", {3});
  EXPECT_TRUE(controller_->Poll().ok());
  EXPECT_FALSE(manager_->Find("a").ok());
  EXPECT_EQ(ServedVersion("b"), 3);
  ASSERT_TRUE(a_gone->WaitForNotificationWithTimeout(kHang));
  EXPECT_TRUE(controller_->Poll().ok());  // the unloaded entry is forgotten
  EXPECT_FALSE(Entry("a", 1).has_value());
}

TEST_F(ControllerTest, LoadAndUnloadOnlyInExplicitMode) {
  AddModel("m", {1});
  Start(Options(ModelControlMode::kPoll));
  EXPECT_EQ(KindOf(controller_->Load("m")), ErrorKind::kForbidden);
  EXPECT_EQ(KindOf(controller_->Unload("m")), ErrorKind::kForbidden);
  EXPECT_THAT(controller_->Load("m").message(), HasSubstr("explicit"));
}

TEST_F(ControllerTest, ExplicitModeLoadsWhatItIsToldAndUnloadsAfterInFlightRequests) {
  AddModel("a", {1});
  AddModel("b", {1});
  auto o = Options(ModelControlMode::kExplicit);
  o.startup_models = {"a"};
  Start(o);
  EXPECT_EQ(ServedVersion("a"), 1);
  EXPECT_FALSE(manager_->Find("b").ok());
  EXPECT_EQ(State("b", std::nullopt), ModelState::kUnavailable);
  EXPECT_EQ(Entry("b", std::nullopt)->reason, "not loaded");

  EXPECT_TRUE(controller_->Load("b").ok());
  EXPECT_EQ(ServedVersion("b"), 1);
  EXPECT_EQ(State("b", 1), ModelState::kReady);
  EXPECT_TRUE(controller_->Load("b").ok());  // unchanged: nothing reloads
  EXPECT_EQ(Loads("b", 1), 1);
  EXPECT_EQ(KindOf(controller_->Load("nope")), ErrorKind::kNotFound);
  EXPECT_EQ(KindOf(controller_->Load("../a")), ErrorKind::kNotFound);

  // A request in flight on a: the unload waits for it.
  auto model = manager_->Find("a");
  ASSERT_TRUE(model.ok());
  gate_->armed = true;
  absl::Notification answered;
  ResultOr result = absl::UnknownError("no answer");
  std::vector<tokenizer::Encoding> rows(1);
  rows[0].ids = {2, 4, 3};
  rows[0].attention_mask = {1, 1, 1};
  rows[0].type_ids = {0, 0, 0};
  (*model)->Submit(rows, {}, [&](ResultOr r) {
    result = std::move(r);
    answered.Notify();
  });
  model->reset();  // only the request holds it now
  ASSERT_TRUE(gate_->entered.WaitForNotificationWithTimeout(kHang));
  absl::Notification* a_gone = ExpectUnload("a", 1);
  EXPECT_TRUE(controller_->Unload("a").ok());
  EXPECT_FALSE(manager_->Find("a").ok());  // new requests no longer find it
  EXPECT_EQ(State("a", 1), ModelState::kUnloading);
  EXPECT_FALSE(a_gone->HasBeenNotified());
  gate_->gate.Notify();
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(kHang));
  EXPECT_TRUE(result.ok()) << result.status();  // finished on the version it started on
  ASSERT_TRUE(a_gone->WaitForNotificationWithTimeout(kHang));
  EXPECT_EQ(State("a", 1), ModelState::kUnavailable);

  EXPECT_TRUE(controller_->Unload("a").ok());  // already unloaded: nothing to do
  EXPECT_EQ(KindOf(controller_->Unload("nope")), ErrorKind::kNotFound);
}

TEST_F(ControllerTest, LoadWithAConfigOverrideReloadsWithIt) {
  AddModel("m", {1}, "max_batch_size: 4\n");
  auto o = Options(ModelControlMode::kExplicit);
  o.startup_models = {"*"};
  Start(o);
  EXPECT_EQ(max_batch_size_["m"], 4);
  EXPECT_TRUE(controller_->Load("m", std::string(R"({"max_batch_size": 16})")).ok());
  EXPECT_EQ(Loads("m", 1), 2);
  EXPECT_EQ(max_batch_size_["m"], 16);
  EXPECT_EQ(ServedVersion("m"), 1);

  absl::Status bad = controller_->Load("m", std::string(R"({"sequence_batching": {}})"));
  EXPECT_EQ(KindOf(bad), ErrorKind::kInvalidInput);
  EXPECT_THAT(bad.message(), HasSubstr("sequence_batching: unsupported"));
  EXPECT_EQ(Loads("m", 1), 2);  // nothing was loaded, the override still serves
  EXPECT_TRUE(controller_->Load("m").ok());  // back to the file
  EXPECT_EQ(max_batch_size_["m"], 4);
}

// Out-of-bounds overrides: refused with kInvalidInput naming the bound, before anything is loaded,
// and the version that serves keeps serving.
TEST_F(ControllerTest, AnOverrideOutOfTheAdminBoundsChangesNothing) {
  AddModel("m", {1}, "max_batch_size: 4\n");
  auto o = Options(ModelControlMode::kExplicit);
  o.startup_models = {"*"};
  Start(o);
  ASSERT_EQ(Loads("m", 1), 1);
  const std::string deep = std::string(20000, '[') + std::string(20000, ']');
  absl::Status s = controller_->Load("m", deep);
  EXPECT_EQ(KindOf(s), ErrorKind::kInvalidInput);
  EXPECT_THAT(s.message(), HasSubstr("parameters.config: request JSON nests arrays/objects deeper than the limit max_json_depth=16"));
  absl::Notification done;
  absl::Status async;
  controller_->LoadAsync("m", std::string(2 << 20, ' '), [&](absl::Status st) {
    async = st;
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_EQ(KindOf(async), ErrorKind::kInvalidInput);
  EXPECT_THAT(async.message(), HasSubstr("parameters.config has 2097152 bytes"));
  // Well-formed, but 100000 instances.
  s = controller_->Load("m", std::string(R"({"instance_group": [{"count": 100000}]})"));
  EXPECT_EQ(KindOf(s), ErrorKind::kInvalidInput);
  EXPECT_THAT(s.message(), HasSubstr("instance_group[0].count: 100000 is outside 1..64"));
  // A model file outside the version directory: the text a missing file gets.
  s = controller_->Load("m", std::string(R"({"default_model_filename": "/etc/hostname"})"));
  absl::Status missing = controller_->Load("m", std::string(R"({"default_model_filename": "absent.onnx"})"));
  EXPECT_EQ(KindOf(s), ErrorKind::kInvalidInput);
  EXPECT_EQ(s.message(), missing.message());
  EXPECT_EQ(Loads("m", 1), 1);  // the factory never ran
  EXPECT_EQ(ServedVersion("m"), 1);
  EXPECT_EQ(max_batch_size_["m"], 4);
}

TEST_F(ControllerTest, StartFailsOnTheFirstBadModelAsTritonsExitOnError) {
  AddModel("m", {1});
  Write("m/1/model.onnx", "corrupt");
  auto c = ModelRepositoryController::Create(manager_.get(), Options(ModelControlMode::kPoll));
  ASSERT_TRUE(c.ok());
  EXPECT_THAT((*c)->Start().message(), HasSubstr("not an ONNX model"));
  auto o = Options(ModelControlMode::kExplicit);
  o.startup_models = {"absent"};
  auto e = ModelRepositoryController::Create(manager_.get(), o);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(KindOf((*e)->Start()), ErrorKind::kNotFound);
}

// Models the manager served before Start (HuggingFace folders) are listed READY and never touched;
// a repository model of the same name is refused.
TEST_F(ControllerTest, ModelsServedFromElsewhereAreListedAndLeftAlone) {
  AddModel("hf", {1});
  {
    auto o = Options(ModelControlMode::kPoll);
    config::RepositoryModel rm;
    rm.name = "hf";
    rm.directory = root_ / "hf";
    auto served = o.factory(rm, config::ModelVersion{7, root_ / "hf" / "1", root_ / "hf" / "1" / "model.onnx"}, o.model);
    ASSERT_TRUE(served.ok());
    ASSERT_TRUE(manager_->Add(*std::move(served)).ok());
  }
  auto c = ModelRepositoryController::Create(manager_.get(), Options(ModelControlMode::kPoll));
  ASSERT_TRUE(c.ok());
  controller_ = *std::move(c);
  EXPECT_THAT(controller_->Start().message(), HasSubstr("taken by a model served from elsewhere"));
  EXPECT_EQ(State("hf", 7), ModelState::kReady);
  EXPECT_EQ(manager_->Versions("hf"), std::vector<int64_t>{7});
}

// The *Async calls run on the controller's thread and answer there.
TEST_F(ControllerTest, AsyncCallsRunOnTheControllerThread) {
  AddModel("m", {1});
  auto o = Options(ModelControlMode::kExplicit);
  o.run_thread = true;
  Start(o);
  absl::Notification done;
  absl::Status status = absl::UnknownError("no answer");
  std::thread::id ran_on;
  controller_->LoadAsync("m", std::nullopt, [&](absl::Status s) {
    status = s;
    ran_on = std::this_thread::get_id();
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kHang));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_EQ(ServedVersion("m"), 1);
  controller_->Stop();
  absl::Status after_stop = absl::OkStatus();
  controller_->UnloadAsync("m", [&](absl::Status s) { after_stop = s; });
  EXPECT_EQ(KindOf(after_stop), ErrorKind::kUnavailable);
}

}  // namespace
}  // namespace tide::serving
