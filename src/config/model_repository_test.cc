#include "config/model_repository.h"

#include <fstream>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tide::config {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ModelRepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    root_ = fs::temp_directory_path() / ("tide_repo_test_" + std::to_string(rd()));
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const fs::path& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }

  // A signature reader that records the file it was asked about.
  RepositoryOptions FakeReader() {
    RepositoryOptions o;
    o.read_signature = [this](const fs::path& p) -> absl::StatusOr<ModelSignature> {
      read_paths_.push_back(p);
      ModelSignature s;
      s.num_labels = 1;
      return s;
    };
    return o;
  }

  fs::path root_;
  std::vector<fs::path> read_paths_;
};

TEST_F(ModelRepositoryTest, ScansModelsWithAndWithoutConfig) {
  Write("bge/config.pbtxt", "name: \"bge\"\nplatform: \"onnxruntime_onnx\"\nmax_batch_size: 8\n");
  Write("bge/1/model.onnx", "x");
  Write("bge/3/model.onnx", "x");
  Write("bge/notes/readme.txt", "not a version");
  Write("minilm/2/model.onnx", "x");
  Write(".hidden/1/model.onnx", "x");
  Write("README.md", "top-level files are ignored");

  auto models = ScanModelRepository(root_, FakeReader());
  ASSERT_TRUE(models.ok()) << models.status();
  ASSERT_EQ(models->size(), 2u);
  const RepositoryModel& bge = (*models)[0];
  EXPECT_EQ(bge.name, "bge");
  EXPECT_FALSE(bge.config_generated);
  EXPECT_THAT(bge.available_versions, ElementsAre(1, 3));
  ASSERT_EQ(bge.versions.size(), 1u);
  EXPECT_EQ(bge.versions[0].version, 3);
  EXPECT_EQ(bge.versions[0].model_file, root_ / "bge" / "3" / "model.onnx");
  EXPECT_EQ(bge.config.max_batch_size(), 8);
  EXPECT_EQ(bge.config.input_size(), 2);  // auto-completed through the reader

  const RepositoryModel& minilm = (*models)[1];
  EXPECT_EQ(minilm.name, "minilm");
  EXPECT_TRUE(minilm.config_generated);
  EXPECT_EQ(minilm.config.name(), "minilm");
  EXPECT_EQ(minilm.config.platform(), "onnxruntime_onnx");
  EXPECT_EQ(minilm.versions[0].version, 2);
  EXPECT_THAT(read_paths_, ElementsAre(root_ / "bge" / "3" / "model.onnx", root_ / "minilm" / "2" / "model.onnx"));
}

TEST_F(ModelRepositoryTest, VersionPolicies) {
  for (int v : {1, 2, 5, 10}) Write("m/" + std::to_string(v) + "/model.onnx", "x");
  auto versions_of = [&](const std::string& policy) {
    Write("m/config.pbtxt", "platform: \"onnxruntime_onnx\"\n" + policy);
    auto m = LoadRepositoryModel(root_ / "m");
    std::vector<int64_t> out;
    if (!m.ok()) {
      ADD_FAILURE() << m.status();
      return out;
    }
    for (const auto& mv : m->versions) out.push_back(mv.version);
    return out;
  };
  EXPECT_THAT(versions_of(""), ElementsAre(10));  // numeric, not lexical, order
  EXPECT_THAT(versions_of("version_policy { latest { num_versions: 2 } }"), ElementsAre(5, 10));
  EXPECT_THAT(versions_of("version_policy { all { } }"), ElementsAre(1, 2, 5, 10));
  EXPECT_THAT(versions_of("version_policy { specific { versions: [5, 1] } }"), ElementsAre(1, 5));
}

TEST_F(ModelRepositoryTest, SpecificVersionMissing) {
  Write("m/1/model.onnx", "x");
  Write("m/config.pbtxt", "version_policy { specific { versions: [7] } }");
  auto m = LoadRepositoryModel(root_ / "m");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), AllOf(HasSubstr("config.pbtxt"), HasSubstr("version_policy.specific.versions"),
                                          HasSubstr("7")));
}

TEST_F(ModelRepositoryTest, DefaultModelFilenameIsHonoured) {
  Write("m/1/reranker.onnx", "x");
  Write("m/config.pbtxt", "default_model_filename: \"reranker.onnx\"");
  auto m = LoadRepositoryModel(root_ / "m");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->versions[0].model_file.filename(), "reranker.onnx");

  Write("m/config.pbtxt", "default_model_filename: \"other.onnx\"");
  m = LoadRepositoryModel(root_ / "m");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(),
              AllOf(HasSubstr("config.pbtxt: default_model_filename: names no model file in version directory 1")));
}

// A default_model_filename outside the version directory is refused on its text, before any file
// is looked up or opened by it, with the text a missing file gets: the answer does not depend on
// what exists elsewhere on disk.
TEST_F(ModelRepositoryTest, AModelFileNameOutsideTheVersionDirectoryIsNeverOpened) {
  Write("m/1/model.onnx", "x");
  Write("m/secret.onnx", "x");  // exists: ../secret.onnx from the version directory
  Write("outside.onnx", "x");   // exists: an absolute path to it
  auto answer = [&](const std::string& name) {
    read_paths_.clear();
    RepositoryOptions o = FakeReader();
    ModelConfig override_config;
    override_config.set_default_model_filename(name);
    o.config_override = override_config;
    auto m = LoadRepositoryModel(root_ / "m", o);
    EXPECT_TRUE(read_paths_.empty()) << name << " was opened: " << read_paths_[0];
    EXPECT_FALSE(m.ok()) << name;
    return m.status();
  };
  const absl::Status missing = answer("absent.onnx");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()),
              HasSubstr("(parameters.config of the load request): default_model_filename: names no model file in "
                        "version directory 1"));
  for (const std::string name :
       {(root_ / "outside.onnx").string(), (root_ / "no-such.onnx").string(), std::string("/etc/hostname"),
        std::string("../secret.onnx"), std::string("../absent.onnx"), std::string("../x"), std::string(".."),
        std::string("."), std::string("1/model.onnx"), std::string("a\\b"), std::string("x\0y", 3)}) {
    const absl::Status s = answer(name);
    EXPECT_EQ(s.code(), missing.code()) << name;
    EXPECT_EQ(s.message(), missing.message()) << name;
  }
  // The same rule in validation (a config read without a repository).
  EXPECT_FALSE(IsModelFileName("/etc/hostname"));
  EXPECT_FALSE(IsModelFileName("../x"));
  EXPECT_FALSE(IsModelFileName(""));
  EXPECT_TRUE(IsModelFileName("model.onnx"));
  EXPECT_TRUE(IsModelFileName("..model.onnx"));  // a name that starts with dots is still one name
  // An allowed name that exists loads (and is then read).
  read_paths_.clear();
  RepositoryOptions o = FakeReader();
  ModelConfig ok_config;
  ok_config.set_default_model_filename("model.onnx");
  o.config_override = ok_config;
  auto m = LoadRepositoryModel(root_ / "m", o);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(read_paths_.size(), 1u);
  EXPECT_EQ(read_paths_[0], root_ / "m" / "1" / "model.onnx");
}

TEST_F(ModelRepositoryTest, ErrorsNameTheFileAndField) {
  Write("m/1/model.onnx", "x");
  Write("m/config.pbtxt", "name: \"other\"");
  auto m = LoadRepositoryModel(root_ / "m");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), AllOf(HasSubstr((root_ / "m" / "config.pbtxt").string()),
                                          HasSubstr("name:"), HasSubstr("\"other\"")));

  Write("m/config.pbtxt", "max_batch_size: 4\ninstance_group [ { kind: KIND_GPU } ]");
  auto scanned = ScanModelRepository(root_, FakeReader());
  ASSERT_FALSE(scanned.ok());
  EXPECT_THAT(scanned.status().message(), AllOf(HasSubstr("config.pbtxt"), HasSubstr("instance_group[0].kind")));

  Write("m/config.pbtxt", "max_batch_size: 4\nparameters { key: \"tokeniser\" value { string_value: \"t.json\" } }");
  scanned = ScanModelRepository(root_, FakeReader());
  ASSERT_FALSE(scanned.ok());
  EXPECT_THAT(scanned.status().message(), AllOf(HasSubstr("config.pbtxt"), HasSubstr("parameters[\"tokeniser\"]")));
}

TEST_F(ModelRepositoryTest, MissingVersionsAndRepository) {
  Write("m/config.pbtxt", "");
  auto m = LoadRepositoryModel(root_ / "m");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("no version directories"));

  auto scanned = ScanModelRepository(root_ / "absent");
  ASSERT_FALSE(scanned.ok());
  EXPECT_EQ(scanned.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ModelRepositoryTest, SignatureReaderErrorsPropagate) {
  Write("m/1/model.onnx", "x");
  RepositoryOptions o;
  o.read_signature = [](const fs::path& p) -> absl::StatusOr<ModelSignature> {
    return absl::FailedPreconditionError(p.string() + ": not an ONNX model");
  };
  auto m = LoadRepositoryModel(root_ / "m", o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(m.status().message(), HasSubstr("model.onnx"));
}

TEST_F(ModelRepositoryTest, ConfigOverrideReplacesTheFile) {
  Write("m/config.pbtxt", "max_batch_size: 4\n");
  Write("m/1/model.onnx", "x");
  RepositoryOptions o = FakeReader();
  ModelConfig override_config;
  override_config.set_max_batch_size(16);
  o.config_override = override_config;
  auto m = LoadRepositoryModel(root_ / "m", o);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->config.max_batch_size(), 16);
  EXPECT_FALSE(m->config_generated);
  // Errors name the override, not the file that was not read.
  override_config.set_name("other");
  o.config_override = override_config;
  auto bad = LoadRepositoryModel(root_ / "m", o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("parameters.config of the load request"));
}

// The repository controller normalizes each version against its own model file, so one corrupt
// version fails alone.
TEST_F(ModelRepositoryTest, NormalizeModelForVersionReadsThatVersionsFile) {
  Write("m/config.pbtxt", "version_policy { all { } }\n");
  Write("m/1/model.onnx", "x");
  Write("m/2/model.onnx", "x");
  auto m = LoadRepositoryModel(root_ / "m", RepositoryOptions{});  // parse only: no signature read
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->versions.size(), 2u);
  RepositoryModel v1 = *m;
  ASSERT_TRUE(NormalizeModelForVersion(m->versions[0], FakeReader(), &v1).ok());
  ASSERT_EQ(read_paths_.size(), 1u);
  EXPECT_EQ(read_paths_[0], root_ / "m" / "1" / "model.onnx");
  RepositoryOptions corrupt;
  corrupt.read_signature = [](const fs::path& p) -> absl::StatusOr<ModelSignature> {
    return absl::InvalidArgumentError(p.string() + ": protobuf parsing failed");
  };
  RepositoryModel v2 = *m;
  absl::Status s = NormalizeModelForVersion(m->versions[1], corrupt, &v2);
  EXPECT_THAT(s.message(), HasSubstr("2/model.onnx: protobuf parsing failed"));
  EXPECT_FALSE(NormalizeModelForVersion(m->versions[1], RepositoryOptions{}, &v2).ok());  // no reader
}

// A version folder's own config.pbtxt overrides the model's parameters key by key and its warmup;
// the rest stays the model's. Its tokenizer file wins over the model folder's.
TEST_F(ModelRepositoryTest, AVersionFolderCarriesItsOwnParametersAndTokenizer) {
  Write("m/config.pbtxt",
        "max_batch_size: 8\nversion_policy { all { } }\n"
        "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n"
        "parameters { key: \"score_activation\" value { string_value: \"sigmoid\" } }\n");
  Write("m/tokenizer.json", "{}");
  Write("m/1/model.onnx", "x");
  Write("m/2/model.onnx", "x");
  Write("m/2/tokenizer.json", "{}");
  Write("m/2/config.pbtxt",
        "name: \"exported-elsewhere\"\nmax_batch_size: 64\n"
        "model_warmup [ { name: \"w\" batch_size: 1 } ]\n"
        "parameters { key: \"max_sequence_length\" value { string_value: \"384\" } }\n"
        "parameters { key: \"prompt_template\" value { string_value: \"{query} {document}\" } }\n");
  auto m = LoadRepositoryModel(root_ / "m", RepositoryOptions{});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->versions.size(), 2u);

  std::string source;
  auto v1 = VersionConfig(*m, m->versions[0], &source);
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(source, (root_ / "m" / "config.pbtxt").string());
  EXPECT_EQ(v1->parameters().at("max_sequence_length").string_value(), "64");
  EXPECT_FALSE(v1->parameters().contains("prompt_template"));
  EXPECT_EQ(v1->model_warmup_size(), 0);
  EXPECT_EQ(VersionTokenizerPath(*m, m->versions[0], "tokenizer.json"), root_ / "m" / "tokenizer.json");

  auto v2 = VersionConfig(*m, m->versions[1], &source);
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(source, (root_ / "m" / "2" / "config.pbtxt").string());
  EXPECT_EQ(v2->parameters().at("max_sequence_length").string_value(), "384");
  EXPECT_EQ(v2->parameters().at("prompt_template").string_value(), "{query} {document}");
  EXPECT_EQ(v2->parameters().at("score_activation").string_value(), "sigmoid");  // the model's
  EXPECT_EQ(v2->model_warmup_size(), 1);
  EXPECT_EQ(v2->max_batch_size(), 8);  // the model's: only parameters and warmup are per version
  EXPECT_EQ(v2->name(), m->config.name());
  EXPECT_EQ(VersionTokenizerPath(*m, m->versions[1], "tokenizer.json"), root_ / "m" / "2" / "tokenizer.json");

  // A version config that does not parse is an error naming it.
  Write("m/2/config.pbtxt", "parameters { key: ");
  auto bad = VersionConfig(*m, m->versions[1]);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("2/config.pbtxt"));
}

}  // namespace
}  // namespace tide::config
