#include "config/hf_model_folder.h"

#include <chrono>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "config/tide_parameters.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tide::config {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kBertConfig[] = R"({"model_type": "bert", "max_position_embeddings": 512,
  "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}})";

class HfModelFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    root_ = fs::temp_directory_path() / ("tide_hf_folder_test_" + std::to_string(rd()));
    folder_ = root_ / "ms-marco-tiny";
    fs::create_directories(folder_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const fs::path& rel, const std::string& text) {
    fs::create_directories((folder_ / rel).parent_path());
    std::ofstream(folder_ / rel) << text;
  }
  // config.json, tokenizer.json and onnx/model.onnx: the layout of an Optimum export on the Hub.
  void WriteHfLayout(const std::string& config_json = kBertConfig) {
    Write("config.json", config_json);
    Write("tokenizer.json", "{}");
    Write("onnx/model.onnx", "x");
  }

  // A signature reader with `labels` output labels that records the file it was asked about.
  RepositoryOptions FakeReader(int64_t labels = 1) {
    RepositoryOptions o;
    o.read_signature = [this, labels](const fs::path& p) -> absl::StatusOr<ModelSignature> {
      read_paths_.push_back(p);
      ModelSignature s;
      s.token_type_ids_name = "token_type_ids";
      s.num_labels = labels;
      return s;
    };
    return o;
  }

  HuggingFaceFolderOptions Options() const {
    HuggingFaceFolderOptions o;
    o.folder = folder_;
    return o;
  }

  static TideParameters Params(const RepositoryModel& m) {
    auto p = TideParameters::FromConfig(m.config, m.config_file.string());
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : TideParameters{};
  }

  fs::path root_;
  fs::path folder_;
  std::vector<fs::path> read_paths_;
};

TEST_F(HfModelFolderTest, OptimumLayoutBecomesARerankEntry) {
  WriteHfLayout();
  auto m = LoadHuggingFaceFolder(Options(), FakeReader());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "ms-marco-tiny");
  EXPECT_EQ(m->config.name(), "ms-marco-tiny");
  EXPECT_EQ(m->directory, folder_);
  EXPECT_TRUE(m->config_generated);
  ASSERT_EQ(m->versions.size(), 1u);
  EXPECT_EQ(m->versions[0].version, 1);
  EXPECT_EQ(m->versions[0].model_file, folder_ / "onnx" / "model.onnx");
  EXPECT_EQ(read_paths_, std::vector<fs::path>{folder_ / "onnx" / "model.onnx"});
  const TideParameters p = Params(*m);
  EXPECT_EQ(p.task, Task::kRerank);
  EXPECT_EQ(p.score_activation, ScoreActivation::kSigmoid);
  EXPECT_EQ(p.tokenizer, "tokenizer.json");
  EXPECT_EQ(p.max_sequence_length, 512);
  // Normalized from the (fake) model, as a repository entry without config.pbtxt would be.
  EXPECT_EQ(m->config.input_size(), 3);
  EXPECT_GT(m->config.max_batch_size(), 0);
}

TEST_F(HfModelFolderTest, ServedNameAndTopLevelOnnx) {
  Write("config.json", kBertConfig);
  Write("tokenizer.json", "{}");
  Write("model.onnx", "x");
  HuggingFaceFolderOptions o = Options();
  o.served_model_name = "reranker";
  o.folder = folder_ / "";  // "dir/" form
  auto m = LoadHuggingFaceFolder(o, FakeReader());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "reranker");
  EXPECT_EQ(m->versions[0].model_file.filename(), "model.onnx");
  EXPECT_EQ(m->versions[0].model_file.lexically_normal(), folder_ / "model.onnx");
  o.served_model_name.clear();
  EXPECT_EQ(ServedModelName(o), "ms-marco-tiny");
}

TEST_F(HfModelFolderTest, OnnxVariantIsFoundByNameUnderOnnx) {
  WriteHfLayout();
  Write("onnx/model_quantized.onnx", "q");
  HuggingFaceFolderOptions o = Options();
  o.onnx_file = "model_quantized.onnx";
  auto m = LoadHuggingFaceFolder(o, FakeReader());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->versions[0].model_file, folder_ / "onnx" / "model_quantized.onnx");
  EXPECT_EQ(m->config.default_model_filename(), "model_quantized.onnx");
  o.onnx_file = "onnx/model_quantized.onnx";
  m = LoadHuggingFaceFolder(o, FakeReader());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->versions[0].model_file, folder_ / "onnx" / "model_quantized.onnx");

  o.onnx_file = "model_O4.onnx";  // named but absent: no fallback to model.onnx
  m = LoadHuggingFaceFolder(o, FakeReader());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), AllOf(HasSubstr("--onnx-file model_O4.onnx: not found"),
                                          HasSubstr((folder_ / "onnx" / "model_O4.onnx").string())));
}

TEST_F(HfModelFolderTest, MissingFilesAreNamed) {
  auto m = LoadHuggingFaceFolder(HuggingFaceFolderOptions{root_ / "absent"}, FakeReader());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("absent: not a directory"));

  Write("config.json", kBertConfig);
  Write("tokenizer.json", "{}");
  m = LoadHuggingFaceFolder(Options(), FakeReader());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), AllOf(HasSubstr("no ONNX file (tried "), HasSubstr("onnx/model.onnx"),
                                          HasSubstr("no weights to export")));

  Write("onnx/model.onnx", "x");
  fs::remove(folder_ / "tokenizer.json");
  m = LoadHuggingFaceFolder(Options(), FakeReader());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("tokenizer.json: not found"));

  Write("tokenizer.json", "{}");
  fs::remove(folder_ / "config.json");
  m = LoadHuggingFaceFolder(Options(), FakeReader());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("config.json: not found"));
  EXPECT_TRUE(read_paths_.empty()) << "the model is read only once the folder is complete";
}

TEST_F(HfModelFolderTest, WeightsWithoutOnnxGiveTheExportCommand) {
  Write("config.json", kBertConfig);
  Write("tokenizer.json", "{}");
  Write("model.safetensors", "weights");
  auto m = LoadHuggingFaceFolder(Options(), FakeReader());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string command = absl::StrCat("/usr/bin/python3 tools/export_model.py --checkpoint ", folder_.string(),
                                           " --name ms-marco-tiny --repository ", (folder_ / ".tide").string());
  EXPECT_EQ(ExportCommand(Options()), command);
  EXPECT_THAT(m.status().message(), AllOf(HasSubstr("has model.safetensors but no ONNX file"), HasSubstr(command)));

  HuggingFaceFolderOptions o = Options();
  o.export_dir = root_ / "exports";
  o.served_model_name = "mine";
  EXPECT_EQ(ExportCommand(o), absl::StrCat("/usr/bin/python3 tools/export_model.py --checkpoint ", folder_.string(),
                                           " --name mine --repository ", (root_ / "exports").string()));
}

TEST_F(HfModelFolderTest, AnExportInTheCacheIsServed) {
  Write("config.json", kBertConfig);
  Write("tokenizer.json", "{}");
  Write("pytorch_model.bin", "weights");
  Write(".tide/ms-marco-tiny/config.pbtxt", "name: \"ms-marco-tiny\"\nbackend: \"onnxruntime\"\n");
  Write(".tide/ms-marco-tiny/1/model.onnx", "x");
  auto m = LoadHuggingFaceFolder(Options(), FakeReader());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "ms-marco-tiny");
  EXPECT_EQ(m->directory, folder_ / ".tide" / "ms-marco-tiny");
  EXPECT_EQ(m->versions.at(0).model_file, folder_ / ".tide" / "ms-marco-tiny" / "1" / "model.onnx");
}

TEST_F(HfModelFolderTest, TheExporterIsCalledOnceWhenThereIsNoExportYet) {
  Write("config.json", kBertConfig);
  Write("tokenizer.json", "{}");
  Write("model.safetensors", "weights");
  HuggingFaceFolderOptions o = Options();
  int calls = 0;
  o.export_weights = [&](const HuggingFaceFolderOptions& given) {
    ++calls;
    EXPECT_EQ(given.folder, folder_);
    Write(".tide/ms-marco-tiny/1/model.onnx", "x");
    return absl::OkStatus();
  };
  auto m = LoadHuggingFaceFolder(o, FakeReader());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(m->versions.at(0).model_file, folder_ / ".tide" / "ms-marco-tiny" / "1" / "model.onnx");
  m = LoadHuggingFaceFolder(o, FakeReader());  // the export is there now: reused
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(calls, 1);

  fs::remove_all(folder_ / ".tide");
  o.export_weights = [&](const HuggingFaceFolderOptions&) {
    ++calls;
    return absl::InternalError("python3 exited 2");
  };
  m = LoadHuggingFaceFolder(o, FakeReader());
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(m.status().message(), AllOf(HasSubstr("(python3 exited 2)"), HasSubstr(ExportCommand(o))));

  fs::remove(folder_ / "model.safetensors");  // nothing to export: the exporter is not called
  m = LoadHuggingFaceFolder(o, FakeReader());
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
}

// A sentence-transformers folder's own ONNX file outputs token vectors: the folder is served from
// the export of its weights (whose graph pools), never from onnx/model.onnx.
TEST_F(HfModelFolderTest, SentenceTransformersFolderIsServedFromItsExport) {
  WriteHfLayout();
  Write("modules.json", R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}])");
  EXPECT_TRUE(IsSentenceTransformersFolder(folder_));
  auto without_weights = LoadHuggingFaceFolder(Options(), FakeReader());
  EXPECT_EQ(without_weights.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(without_weights.status().message(), HasSubstr("no weights to export"));
  Write("model.safetensors", "weights");
  HuggingFaceFolderOptions o = Options();
  int calls = 0;
  o.export_weights = [&](const HuggingFaceFolderOptions&) {
    ++calls;
    Write(".tide/ms-marco-tiny/config.pbtxt", "name: \"ms-marco-tiny\"\nbackend: \"onnxruntime\"\n");
    Write(".tide/ms-marco-tiny/1/model.onnx", "x");
    return absl::OkStatus();
  };
  auto m = LoadHuggingFaceFolder(o, FakeReader());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(m->versions.at(0).model_file, folder_ / ".tide" / "ms-marco-tiny" / "1" / "model.onnx");
  // An explicit --onnx-file is still taken as given.
  o.onnx_file = "onnx/model.onnx";
  auto given = LoadHuggingFaceFolder(o, FakeReader());
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->versions.at(0).model_file, folder_ / "onnx" / "model.onnx");
}

TEST_F(HfModelFolderTest, AnExportOlderThanTheWeightsIsStale) {
  Write("config.json", kBertConfig);
  Write("tokenizer.json", "{}");
  Write(".tide/ms-marco-tiny/1/model.onnx", "x");
  Write("model.safetensors", "new weights");
  fs::last_write_time(folder_ / ".tide" / "ms-marco-tiny" / "1" / "model.onnx",
                      fs::last_write_time(folder_ / "model.safetensors") - std::chrono::hours(1));
  auto m = LoadHuggingFaceFolder(Options(), FakeReader());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(m.status().message(), AllOf(HasSubstr("is older than"), HasSubstr(ExportCommand(Options()))));

  HuggingFaceFolderOptions o = Options();
  int calls = 0;
  o.export_weights = [&](const HuggingFaceFolderOptions&) {
    ++calls;
    Write(".tide/ms-marco-tiny/1/model.onnx", "y");  // rewritten: newer than the weights
    return absl::OkStatus();
  };
  m = LoadHuggingFaceFolder(o, FakeReader());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(calls, 1);
  m = LoadHuggingFaceFolder(o, FakeReader());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(calls, 1) << "a fresh export is reused";
}

TEST_F(HfModelFolderTest, ClassifierLabelsComeFromId2Label) {
  WriteHfLayout(R"({"model_type": "distilbert", "max_position_embeddings": 512,
                    "id2label": {"1": "POSITIVE", "0": "NEGATIVE"}})");
  auto m = LoadHuggingFaceFolder(Options(), FakeReader(2));
  ASSERT_TRUE(m.ok()) << m.status();
  const TideParameters p = Params(*m);
  EXPECT_EQ(p.task, Task::kClassify);
  EXPECT_EQ(p.score_activation, ScoreActivation::kSoftmax);
  EXPECT_EQ(m->labels, (std::vector<std::string>{"NEGATIVE", "POSITIVE"})) << "in id order";

  // config.json's labels must match the model's output.
  m = LoadHuggingFaceFolder(Options(), FakeReader(1));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("config.json: 2 label(s), but"));
}

TEST_F(HfModelFolderTest, NoLabelsInConfigTakesTheModels) {
  WriteHfLayout(R"({"model_type": "bert"})");
  auto m = LoadHuggingFaceFolder(Options(), FakeReader(3));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Params(*m).task, Task::kClassify);
  EXPECT_FALSE(Params(*m).max_sequence_length.has_value()) << "no max_position_embeddings: the tokenizer's or 512";
}

constexpr char kQwen3CausalLmConfig[] = R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
  "max_position_embeddings": 40960, "tie_word_embeddings": true})";

TEST_F(HfModelFolderTest, CausalLmFolderNeedsTaskRerankAndPassesItToTheExport) {
  Write("config.json", kQwen3CausalLmConfig);
  Write("tokenizer.json", "{}");
  Write("model.safetensors", "weights");
  HuggingFaceFolderOptions o = Options();
  int calls = 0;
  HuggingFaceFolderOptions exported_with;
  o.export_weights = [&](const HuggingFaceFolderOptions& given) {
    ++calls;
    exported_with = given;
    Write(".tide/ms-marco-tiny/1/model.onnx", "x");
    return absl::OkStatus();
  };
  auto m = LoadHuggingFaceFolder(o, FakeReader());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), AllOf(HasSubstr("config.json: Qwen3ForCausalLM is a causal language model"),
                                          HasSubstr("pass --task rerank")));
  EXPECT_EQ(calls, 0) << "nothing is exported before the task is known";

  o.task = "rerank";
  o.rerank_tokens = "yes,no";
  m = LoadHuggingFaceFolder(o, FakeReader());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(exported_with.task, "rerank");
  EXPECT_EQ(exported_with.rerank_tokens, "yes,no");
  EXPECT_EQ(ExportCommand(o), absl::StrCat("/usr/bin/python3 tools/export_model.py --checkpoint ", folder_.string(),
                                           " --name ms-marco-tiny --repository ", (folder_ / ".tide").string(),
                                           " --task rerank --rerank-tokens yes,no"));

  // Without the export hook the refusal holds the whole command, flags included.
  fs::remove_all(folder_ / ".tide");
  o.export_weights = nullptr;
  m = LoadHuggingFaceFolder(o, FakeReader());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(m.status().message(), HasSubstr("--task rerank --rerank-tokens yes,no"));
}

// Qwen3-Embedding: a sentence-transformers folder whose config.json names Qwen3ForCausalLM is an
// embedding model, exported without --task; --task rerank still asks for the reranker.
TEST_F(HfModelFolderTest, CausalLmSentenceTransformersFolderIsAnEmbedder) {
  Write("config.json", kQwen3CausalLmConfig);
  Write("tokenizer.json", "{}");
  Write("model.safetensors", "weights");
  Write("modules.json", R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}])");
  HuggingFaceFolderOptions o = Options();
  int calls = 0;
  HuggingFaceFolderOptions exported_with;
  o.export_weights = [&](const HuggingFaceFolderOptions& given) {
    ++calls;
    exported_with = given;
    Write(".tide/ms-marco-tiny/1/model.onnx", "x");
    return absl::OkStatus();
  };
  auto m = LoadHuggingFaceFolder(o, FakeReader());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(exported_with.task, "");
  EXPECT_EQ(ExportCommand(o), absl::StrCat("/usr/bin/python3 tools/export_model.py --checkpoint ", folder_.string(),
                                           " --name ms-marco-tiny --repository ", (folder_ / ".tide").string()));

  // Rerank tokens belong to a reranker: refused without --task rerank, taken with it.
  o.rerank_tokens = "yes,no";
  m = LoadHuggingFaceFolder(o, FakeReader());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("--rerank-tokens yes,no"));
  o.task = "rerank";
  EXPECT_TRUE(CheckDecoderOptions(HuggingFaceConfig{"qwen3", {"Qwen3ForCausalLM"}, {}, {}, {}},
                                  (folder_ / "config.json").string(), o).ok());

  // Without modules.json the folder is a causal LM again, which needs --task rerank.
  fs::remove(folder_ / "modules.json");
  o.task.clear();
  o.rerank_tokens.clear();
  EXPECT_THAT(CheckDecoderOptions(HuggingFaceConfig{"qwen3", {"Qwen3ForCausalLM"}, {}, {}, {}},
                                  (folder_ / "config.json").string(), o).message(),
              HasSubstr("pass --task rerank"));
}

TEST_F(HfModelFolderTest, DecoderSequenceClassifierNeedsNoFlag) {
  for (const char* arch : {"Qwen3ForSequenceClassification", "Qwen2ForSequenceClassification"}) {
    fs::remove_all(folder_);
    Write("config.json", absl::StrCat(R"({"architectures": [")", arch, R"("], "num_labels": 1})"));
    Write("tokenizer.json", "{}");
    Write("model.safetensors", "weights");
    HuggingFaceFolderOptions o = Options();
    o.export_weights = [&](const HuggingFaceFolderOptions& given) {
      EXPECT_EQ(given.task, "");
      Write(".tide/ms-marco-tiny/1/model.onnx", "x");
      return absl::OkStatus();
    };
    auto m = LoadHuggingFaceFolder(o, FakeReader());
    EXPECT_TRUE(m.ok()) << arch << ": " << m.status();
  }
}

TEST_F(HfModelFolderTest, UnsupportedDecodersAndMisplacedFlagsAreRefused) {
  Write("config.json", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama"})");
  Write("tokenizer.json", "{}");
  Write("model.safetensors", "weights");
  HuggingFaceFolderOptions o = Options();
  o.task = "rerank";
  o.export_weights = [&](const HuggingFaceFolderOptions&) -> absl::Status {
    ADD_FAILURE() << "an unsupported architecture must not be exported";
    return absl::OkStatus();
  };
  auto m = LoadHuggingFaceFolder(o, FakeReader());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(),
              AllOf(HasSubstr("architecture LlamaForCausalLM is not supported"), HasSubstr("Qwen3ForCausalLM"),
                    HasSubstr("Qwen2ForSequenceClassification")));

  // --rerank-tokens belongs to a CausalLM folder; --task takes only rerank.
  Write("config.json", R"({"architectures": ["BertForSequenceClassification"], "model_type": "bert"})");
  o.task.clear();
  o.rerank_tokens = "yes,no";
  m = LoadHuggingFaceFolder(o, FakeReader());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), AllOf(HasSubstr("--rerank-tokens yes,no: only for a causal LM folder"),
                                          HasSubstr("BertForSequenceClassification")));
  o.rerank_tokens.clear();
  o.task = "classify";
  m = LoadHuggingFaceFolder(o, FakeReader());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("--task classify: the only task is rerank"));

  EXPECT_TRUE(IsSupportedDecoderArchitecture("Qwen2ForCausalLM"));
  EXPECT_FALSE(IsSupportedDecoderArchitecture("LlamaForCausalLM"));
  EXPECT_TRUE(IsCausalLmArchitecture("LlamaForCausalLM"));
  EXPECT_FALSE(IsCausalLmArchitecture("Qwen3ForSequenceClassification"));
}

TEST_F(HfModelFolderTest, ConfigJsonVariants) {
  auto parse = [](const std::string& text) { return ParseHuggingFaceConfig(text, "config.json"); };
  // XLM-RoBERTa: 514 positions serve 512 tokens; bge-reranker-v2-m3's 8194 are capped at 512.
  auto c = parse(R"({"model_type": "xlm-roberta", "max_position_embeddings": 514, "pad_token_id": 1})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_sequence_length, 512);
  c = parse(R"({"model_type": "xlm-roberta", "max_position_embeddings": 8194, "num_labels": 1})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_sequence_length, 512);
  EXPECT_EQ(c->num_labels, 1);
  c = parse(R"({"model_type": "roberta", "max_position_embeddings": 130})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_sequence_length, 128);
  c = parse(R"({"model_type": "bert", "max_position_embeddings": 128})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_sequence_length, 128);
  auto capped = ParseHuggingFaceConfig(R"({"max_position_embeddings": 1024})", "config.json", 256);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->max_sequence_length, 256);
  c = parse(R"({"id2label": {"0": "irrelevant", "1": "relevant"}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->labels, (std::vector<std::string>{"irrelevant", "relevant"}));
  EXPECT_EQ(c->num_labels, 2);
  c = parse(R"({"architectures": ["Qwen3ForCausalLM"]})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architectures, std::vector<std::string>{"Qwen3ForCausalLM"});

  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"[1, 2]", "config.json: not a JSON object"},
           {"{", "config.json: not a JSON object"},
           {R"({"num_labels": 0})", "config.json: num_labels: 0 is not a positive integer"},
           {R"({"num_labels": 3, "id2label": {"0": "a", "1": "b"}})", "num_labels 3 disagrees with id2label's 2"},
           {R"({"id2label": {"0": "a", "2": "b"}})", "id2label: ids must be 0..1"},
           {R"({"id2label": {"x": "a"}})", "id2label: entry \"x\""},
           {R"({"id2label": []})", "id2label: not an object"},
           {R"({"max_position_embeddings": "512"})", "max_position_embeddings: \"512\" is not a positive integer"},
           {R"({"model_type": "xlm-roberta", "max_position_embeddings": 2})", "leaves room for 0 token(s)"},
           {R"({"model_type": 7})", "model_type: not a string"},
           {R"({"architectures": "Qwen3ForCausalLM"})", "architectures: not a list of names"},
           {R"({"architectures": [1]})", "architectures: 1 is not a name"}}) {
    auto bad = parse(text);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(bad.status().message(), HasSubstr(message)) << text;
  }
}

}  // namespace
}  // namespace tide::config
