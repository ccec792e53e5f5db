// Black-box tests of `tide serve --model <HuggingFace folder>` (config::LoadHuggingFaceFolder):
//   - an Optimum-style folder (config.json, tokenizer.json, onnx/model.onnx) laid out from the
//     exported tiny-bert is served in one command and reranks; served beside a model repository
//     holding the same model, both answer the same scores, and --model alone does not read the
//     repository;
//   - a folder with only safetensors weights is exported once with tools/export_model.py into
//     <folder>/.tide/<name> and served; later starts reuse the export; weights the export cannot
//     read (or --auto-export false) are refused with the exact export command;
//   - untrusted folders: a pytorch_model.bin whose unpickling would run code is refused (exit 1,
//     the file named, "needs code to load") and its code never runs; the export tool is never
//     taken from the working directory (a tide binary without tools/ beside it, started in a
//     folder holding a trap tools/export_model.py, refuses and says how to set --export-script);
//   - decoder-only LLM rerankers: a tiny Qwen3ForCausalLM folder (config.json + model.safetensors
//     written by tools/test_decoder_export.py's helper) is refused without --task rerank, and an
//     unsupported decoder architecture or a misplaced --rerank-tokens is refused, all before any
//     export runs; with --task rerank the export (yes/no head, prompt parameters) is written and
//     verified, and served once the server knows the prompt parameters;
//   - the real third-party DistilBERT export in ../shared/assets (2 labels, no token_type_ids),
//     laid out as an HF folder with the bert-base-uncased tokenizer.json, is served as a classifier
//     whose rerank score is P(last label) — checked against the asset's reference logits. Skipped
//     with a message when ../shared/assets is absent.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "blackbox_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_client.h"
#include "shared_assets.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kQuery[] = "what is a panda?";
const std::vector<std::string> kDocs = {"The giant panda is a bear species endemic to China.",
                                        "Paris is the capital of France.", "hi"};

absl::Status WriteText(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path);
  out << text;
  out.close();
  return out ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", path.string()));
}

// config.json of tools/export_model.py's tiny-bert preset as an HF checkpoint carries it.
constexpr char kTinyBertConfig[] = R"({"architectures": ["BertForSequenceClassification"], "model_type": "bert",
  "vocab_size": 2048, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "intermediate_size": 128, "max_position_embeddings": 128, "type_vocab_size": 2, "pad_token_id": 0,
  "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}})";

// <parent>/<name>: config.json, tokenizer.json and onnx/model.onnx from the exported tiny-bert.
absl::StatusOr<fs::path> TinyBertHfFolder(const fs::path& parent, const std::string& name) {
  auto tiny = ExportedTinyBert();
  if (!tiny.ok()) return tiny.status();
  const fs::path folder = parent / name;
  if (auto s = WriteText(folder / "config.json", kTinyBertConfig); !s.ok()) return s;
  fs::create_directories(folder / "onnx");
  fs::copy_file(*tiny / "1" / "model.onnx", folder / "onnx" / "model.onnx");
  fs::copy_file(*tiny / "tokenizer.json", folder / "tokenizer.json");
  return folder;
}

absl::StatusOr<std::unique_ptr<tide::testing::ServerProcess>> Serve(const std::vector<std::string>& args) {
  tide::testing::ServerProcessOptions options;
  options.binary = TideBinary().string();
  options.args = {"serve"};
  options.args.insert(options.args.end(), args.begin(), args.end());
  options.startup_timeout = std::chrono::milliseconds(120000);
  return tide::testing::ServerProcess::Start(options);
}

json PostJson(tide::testing::ServerProcess& server, const std::string& path, const json& body, int want = 200) {
  tide::testing::HttpClient client(server.host(), server.port(), std::chrono::milliseconds(60000));
  const auto r = client.Post(path, body.dump());
  EXPECT_EQ(r.status, want) << path << ": " << r.error << r.body;
  return ParseJson(r.body);
}

// TEI /rerank: score by document index.
std::vector<double> RerankScores(tide::testing::ServerProcess& server, bool raw = false) {
  const json out = PostJson(server, "/rerank", {{"query", kQuery}, {"texts", kDocs}, {"raw_scores", raw}});
  std::vector<double> scores(kDocs.size(), NAN);
  if (!out.is_array()) return scores;
  for (const json& r : out) scores.at(r.at("index").get<size_t>()) = r.at("score").get<double>();
  return scores;
}

// Cohere /v1/rerank against a named model: relevance score by document index.
std::vector<double> CohereScores(tide::testing::ServerProcess& server, const std::string& model) {
  const json out = PostJson(server, "/v1/rerank", {{"model", model}, {"query", kQuery}, {"documents", kDocs}});
  std::vector<double> scores(kDocs.size(), NAN);
  if (!out.contains("results")) return scores;
  for (const json& r : out["results"]) scores.at(r.at("index").get<size_t>()) = r.at("relevance_score").get<double>();
  return scores;
}

int GetStatus(tide::testing::ServerProcess& server, const std::string& path) {
  tide::testing::HttpClient client(server.host(), server.port(), std::chrono::milliseconds(60000));
  return client.Get(path).status;
}

TEST(ServeHfModelTest, OptimumLayoutIsServedInOneCommandAndReranks) {
  TempDir tmp;
  auto folder = TinyBertHfFolder(tmp.path(), "tiny-bert-hf");
  ASSERT_TRUE(folder.ok()) << folder.status();
  auto server = Serve({"--model", folder->string(), "--log-level", "info"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(GetStatus(**server, "/v2/models/tiny-bert-hf"), 200) << (*server)->Diagnostics();
  // --model alone serves only the folder: the default repository (models/) is not read.
  EXPECT_EQ(GetStatus(**server, "/v2/models/minilm-l6"), 404);
  const std::vector<double> scores = RerankScores(**server);
  const std::vector<double> raw = RerankScores(**server, /*raw=*/true);
  ASSERT_EQ(scores.size(), kDocs.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    EXPECT_GT(scores[i], 0.0);
    EXPECT_LT(scores[i], 1.0);
    EXPECT_NEAR(scores[i], Sigmoid(raw[i]), 1e-6) << "one label: task rerank, sigmoid score";
  }
  const json meta = ParseJson(tide::testing::HttpClient((*server)->host(), (*server)->port(),
                                                        std::chrono::milliseconds(60000))
                                  .Get("/v2/models/tiny-bert-hf")
                                  .body);
  EXPECT_EQ(meta.value("name", ""), "tiny-bert-hf") << meta.dump();
}

TEST(ServeHfModelTest, BesideARepositoryTheSameModelGivesTheSameScores) {
  TempDir tmp;
  auto folder = TinyBertHfFolder(tmp.path(), "folder");
  ASSERT_TRUE(folder.ok()) << folder.status();
  const fs::path repo = tmp.path() / "repo";
  ASSERT_TRUE(AddTinyBert(repo, "from-repo", "parameters { key: \"max_sequence_length\" value { string_value: \"128\" } }\n").ok());
  auto server = Serve({"--model-repository", repo.string(), "--model", folder->string(), "--served-model-name",
                       "from-folder", "--log-level", "warn"});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::vector<double> a = CohereScores(**server, "from-repo");
  const std::vector<double> b = CohereScores(**server, "from-folder");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_FALSE(std::isnan(a[i]));
    EXPECT_NEAR(a[i], b[i], 1e-6) << "document " << i;
  }
  EXPECT_NE(a[0], a[1]) << "the model must tell the documents apart";

  // A name taken by the repository is refused at startup.
  auto clash = RunCommand({TideBinary().string(), "serve", "--model-repository", repo.string(), "--model",
                           folder->string(), "--served-model-name", "from-repo", "--port", "0"});
  ASSERT_TRUE(clash.ok()) << clash.status();
  EXPECT_EQ(clash->exit_code, 1) << clash->output;
  EXPECT_THAT(clash->output, HasSubstr("model name 'from-repo'"));
}

TEST(ServeHfModelTest, UnreadableWeightsAreRefusedWithTheExportCommandThenTheExportIsServed) {
  TempDir tmp;
  const fs::path folder = tmp.path() / "st-only";
  ASSERT_TRUE(WriteText(folder / "config.json", kTinyBertConfig).ok());
  auto tiny = ExportedTinyBert();
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  fs::copy_file(*tiny / "tokenizer.json", folder / "tokenizer.json");
  ASSERT_TRUE(WriteText(folder / "model.safetensors", "not a safetensors file").ok());
  const std::string command = absl::StrCat("/usr/bin/python3 tools/export_model.py --checkpoint ", folder.string(),
                                           " --name st-only --repository ", (folder / ".tide").string());

  // The automatic export runs and fails on the weights: its own message, then the command.
  auto failed = RunCommand({TideBinary().string(), "serve", "--model", folder.string(), "--port", "0",
                            "--export-script", (SourceDir() / "tools" / "export_model.py").string()});
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->exit_code, 1) << failed->output;
  EXPECT_THAT(failed->output, HasSubstr("exporting them to ONNX once"));
  EXPECT_THAT(failed->output, HasSubstr("cannot read safetensors weights"));
  EXPECT_THAT(failed->output, HasSubstr("(the export exited 2; see its messages above)"));
  EXPECT_THAT(failed->output, HasSubstr(command));
  EXPECT_FALSE(fs::exists(folder / ".tide" / "st-only")) << "a failed export leaves no entry";

  // --auto-export false: refused at once with the command.
  auto refused = RunCommand({TideBinary().string(), "serve", "--model", folder.string(), "--port", "0",
                             "--auto-export", "false"});
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->exit_code, 1) << refused->output;
  EXPECT_THAT(refused->output, Not(HasSubstr("exporting them")));
  EXPECT_THAT(refused->output, HasSubstr(command));

  // What that command writes: a repository entry <folder>/.tide/st-only (newer than the weights, so
  // not stale), served from then on.
  const fs::path entry = folder / ".tide" / "st-only";
  fs::create_directories(entry / "1");
  fs::copy_file(*tiny / "1" / "model.onnx", entry / "1" / "model.onnx");
  fs::copy_file(*tiny / "tokenizer.json", entry / "tokenizer.json");
  ASSERT_TRUE(WriteText(entry / "config.pbtxt",
                        "parameters { key: \"max_sequence_length\" value { string_value: \"128\" } }\n")
                  .ok());
  auto server = Serve({"--model", folder.string(), "--log-level", "warn"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(GetStatus(**server, "/v2/models/st-only"), 200);
  const std::vector<double> scores = RerankScores(**server);
  for (double s : scores) EXPECT_TRUE(s > 0.0 && s < 1.0) << s;
}

TEST(ServeHfModelTest, SafetensorsOnlyFolderIsExportedOnceThenServed) {
  TempDir tmp;
  const fs::path folder = tmp.path() / "tiny-st";
  // An HF checkpoint folder as the Hub has them now: config.json, tokenizer.json, model.safetensors
  // (tools/test_safetensors.py's writer; tiny-bert with seeded weights).
  const std::string script = absl::StrCat(
      "import json, os, sys\n"
      "sys.path.insert(0, ", json((SourceDir() / "tools").string()).dump(), ")\n",
      "import crossencoder, make_wordpiece_tokenizer, test_safetensors\n"
      "cfg = crossencoder.PRESETS['tiny-bert']\n"
      "d = sys.argv[1]\n"
      "os.makedirs(d)\n"
      "test_safetensors.write_safetensors(os.path.join(d, 'model.safetensors'),\n"
      "                                   crossencoder.build_model(cfg, seed=3).state_dict())\n"
      "json.dump(cfg.to_hf_dict(), open(os.path.join(d, 'config.json'), 'w'))\n"
      "make_wordpiece_tokenizer.write_tokenizer(os.path.join(d, 'tokenizer.json'), 300, 'bert')\n");
  auto made = RunCommand({"/usr/bin/python3", "-c", script, folder.string()});
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_EQ(made->exit_code, 0) << made->output;

  const std::vector<std::string> args = {"--model", folder.string(), "--log-level", "warn", "--export-script",
                                         (SourceDir() / "tools" / "export_model.py").string()};
  {
    auto server = Serve(args);
    ASSERT_TRUE(server.ok()) << server.status();
    EXPECT_THAT((*server)->Stderr(), HasSubstr("exporting them to ONNX once"));
    EXPECT_THAT((*server)->Stderr(), HasSubstr("verified: ONNX Runtime matches PyTorch"));
    EXPECT_TRUE(fs::is_regular_file(folder / ".tide" / "tiny-st" / "1" / "model.onnx"));
    EXPECT_EQ(GetStatus(**server, "/v2/models/tiny-st"), 200);
    const std::vector<double> scores = RerankScores(**server);
    EXPECT_NE(scores[0], scores[1]) << "the model must tell the documents apart";
  }
  auto again = Serve(args);  // the export is reused
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT((*again)->Stderr(), Not(HasSubstr("exporting")));
  EXPECT_EQ(GetStatus(**again, "/v2/models/tiny-st"), 200);
}

// <parent>/<name> with tiny-bert's config.json and tokenizer.json, and no weights yet.
absl::StatusOr<fs::path> TinyBertConfigFolder(const fs::path& parent, const std::string& name) {
  auto tiny = ExportedTinyBert();
  if (!tiny.ok()) return tiny.status();
  const fs::path folder = parent / name;
  if (auto s = WriteText(folder / "config.json", kTinyBertConfig); !s.ok()) return s;
  fs::copy_file(*tiny / "tokenizer.json", folder / "tokenizer.json");
  return folder;
}

TEST(ServeHfModelTest, PytorchCheckpointThatRunsCodeWhenUnpickledIsRefusedAndNeverRun) {
  TempDir tmp;
  auto folder = TinyBertConfigFolder(tmp.path(), "hostile");
  ASSERT_TRUE(folder.ok()) << folder.status();
  const fs::path marker = tmp.path() / "pwned";
  // A checkpoint in torch.save's own (zip) format, as the Hub has them, whose pickle calls
  // os.system when unpickled: a full torch.load would create the marker.
  const std::string script =
      "import os, sys, torch\n"
      "class Payload:\n"
      "    def __reduce__(self):\n"
      "        return (os.system, ('touch ' + sys.argv[2],))\n"
      "torch.save({'bert.embeddings.word_embeddings.weight': Payload()}, sys.argv[1])\n";
  auto made = RunCommand({"/usr/bin/python3", "-c", script, (*folder / "pytorch_model.bin").string(), marker.string()});
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_EQ(made->exit_code, 0) << made->output;
  ASSERT_FALSE(fs::exists(marker));

  // The export tool found beside the binary (build/tide -> tools/export_model.py), as by default.
  auto refused = RunCommand({TideBinary().string(), "serve", "--model", folder->string(), "--port", "0"});
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->exit_code, 1) << refused->output;
  EXPECT_THAT(refused->output, HasSubstr(absl::StrCat((*folder / "pytorch_model.bin").string(),
                                                      ": refused: only plain tensors are accepted")));
  EXPECT_THAT(refused->output, HasSubstr("needs code to load"));
  EXPECT_THAT(refused->output, HasSubstr("Use model.safetensors instead"));
  EXPECT_THAT(refused->output, HasSubstr("has pytorch_model.bin but no ONNX file"));
  EXPECT_FALSE(fs::exists(marker)) << "unpickling the checkpoint ran its code:\n" << refused->output;
  EXPECT_FALSE(fs::exists(*folder / ".tide" / "hostile")) << "a refused export leaves no entry";
}

TEST(ServeHfModelTest, ExportToolIsNeverTakenFromTheWorkingDirectory) {
  TempDir tmp;
  // A tide binary with no tools/ beside it (as one copied somewhere, or installed without its share/).
  const fs::path bin = tmp.path() / "bin" / "tide";
  fs::create_directories(bin.parent_path());
  std::error_code ec;
  fs::create_hard_link(TideBinary(), bin, ec);
  if (ec) fs::copy_file(TideBinary(), bin);
  // The working directory holds a trap: a tools/export_model.py that records being run.
  const fs::path work = tmp.path() / "work";
  const fs::path marker = tmp.path() / "trap-ran";
  ASSERT_TRUE(WriteText(work / "tools" / "export_model.py",
                        absl::StrCat("open(", json(marker.string()).dump(), ", 'w').close()\n"))
                  .ok());
  auto folder = TinyBertConfigFolder(work, "st-only");
  ASSERT_TRUE(folder.ok()) << folder.status();
  ASSERT_TRUE(WriteText(*folder / "model.safetensors", "weights the export would read").ok());

  auto refused = RunCommand({"/bin/sh", "-c", "cd \"$1\" && exec \"$2\" serve --model st-only --port 0", "sh",
                             work.string(), bin.string()});
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->exit_code, 1) << refused->output;
  EXPECT_THAT(refused->output, HasSubstr("the export tool tools/export_model.py was not found beside the tide binary"));
  EXPECT_THAT(refused->output, HasSubstr((fs::canonical(tmp.path()) / "tools" / "export_model.py").string()));
  EXPECT_THAT(refused->output, HasSubstr("the working directory is never searched"));
  EXPECT_THAT(refused->output, HasSubstr("set --export-script PATH"));
  EXPECT_FALSE(fs::exists(marker)) << "tide ran the working directory's tools/export_model.py:\n" << refused->output;
}

constexpr std::string_view kQwen3Tokenizer = "tokenizers/qwen3/tokenizer.json";

// <parent>/<name>: a tiny Qwen3ForCausalLM checkpoint (config.json, model.safetensors with seeded
// weights; the qwen3-tiny preset's shape, `vocab` rows) from tools/test_decoder_export.py's helper,
// with `tokenizer` copied in when given; `architecture` replaces config.json's architectures.
absl::StatusOr<fs::path> TinyDecoderFolder(const fs::path& parent, const std::string& name, int vocab,
                                           const std::optional<fs::path>& tokenizer = std::nullopt,
                                           const std::string& architecture = "") {
  const fs::path folder = parent / name;
  const std::string script = absl::StrCat(
      "import dataclasses, sys\n"
      "sys.path.insert(0, ", json((SourceDir() / "tools").string()).dump(), ")\n",
      "import decoder, test_decoder_export as t\n"
      "cfg = dataclasses.replace(decoder.PRESETS['qwen3-tiny'], vocab_size=int(sys.argv[2]))\n"
      "t.write_hf_folder(sys.argv[1], decoder.build_causal_lm(cfg, seed=3), cfg, sys.argv[3] or None)\n");
  auto made = RunCommand({"/usr/bin/python3", "-c", script, folder.string(), std::to_string(vocab),
                          tokenizer ? tokenizer->string() : ""});
  if (!made.ok()) return made.status();
  if (made->exit_code != 0) return absl::InternalError(absl::StrCat("writing ", folder.string(), ": ", made->output));
  if (!architecture.empty()) {
    std::ifstream in(folder / "config.json");
    json config = json::parse(in);
    config["architectures"] = {architecture};
    config["model_type"] = "llama";
    if (auto s = WriteText(folder / "config.json", config.dump()); !s.ok()) return s;
  }
  return folder;
}

TEST(ServeHfModelTest, DecoderCausalLmFolderIsRefusedWithoutTaskRerank) {
  TempDir tmp;
  auto folder = TinyDecoderFolder(tmp.path(), "qwen3-causal", 10000);
  ASSERT_TRUE(folder.ok()) << folder.status();
  const std::string script = (SourceDir() / "tools" / "export_model.py").string();
  auto refused = RunCommand({TideBinary().string(), "serve", "--model", folder->string(), "--port", "0",
                             "--export-script", script});
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->exit_code, 1) << refused->output;
  EXPECT_THAT(refused->output, HasSubstr("config.json: Qwen3ForCausalLM is a causal language model"));
  EXPECT_THAT(refused->output, HasSubstr("pass --task rerank"));
  EXPECT_THAT(refused->output, Not(HasSubstr("exporting them"))) << "nothing is exported before the task is known";
  EXPECT_FALSE(fs::exists(*folder / ".tide"));

  // --task takes only rerank.
  auto bad_task = RunCommand({TideBinary().string(), "serve", "--model", folder->string(), "--port", "0",
                              "--task", "classify"});
  ASSERT_TRUE(bad_task.ok()) << bad_task.status();
  EXPECT_NE(bad_task->exit_code, 0) << bad_task->output;
  EXPECT_THAT(bad_task->output, HasSubstr("--task"));
  EXPECT_THAT(bad_task->output, HasSubstr("rerank"));
}

TEST(ServeHfModelTest, UnsupportedDecoderArchitectureAndMisplacedRerankTokensAreRefused) {
  TempDir tmp;
  auto llama = TinyDecoderFolder(tmp.path(), "llama", 10000, std::nullopt, "LlamaForCausalLM");
  ASSERT_TRUE(llama.ok()) << llama.status();
  const std::string script = (SourceDir() / "tools" / "export_model.py").string();
  auto refused = RunCommand({TideBinary().string(), "serve", "--model", llama->string(), "--port", "0", "--task",
                             "rerank", "--export-script", script});
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->exit_code, 1) << refused->output;
  EXPECT_THAT(refused->output, HasSubstr("architecture LlamaForCausalLM is not supported"));
  EXPECT_THAT(refused->output, HasSubstr("Qwen3ForCausalLM, Qwen2ForCausalLM, Qwen3ForSequenceClassification"));
  EXPECT_FALSE(fs::exists(*llama / ".tide"));

  // --rerank-tokens belongs to a CausalLM folder, not to a cross-encoder's.
  auto bert = TinyBertConfigFolder(tmp.path(), "bert");
  ASSERT_TRUE(bert.ok()) << bert.status();
  ASSERT_TRUE(WriteText(*bert / "model.safetensors", "weights").ok());
  auto misplaced = RunCommand({TideBinary().string(), "serve", "--model", bert->string(), "--port", "0",
                               "--rerank-tokens", "yes,no", "--export-script", script});
  ASSERT_TRUE(misplaced.ok()) << misplaced.status();
  EXPECT_EQ(misplaced->exit_code, 1) << misplaced->output;
  EXPECT_THAT(misplaced->output, HasSubstr("--rerank-tokens yes,no: only for a causal LM folder"));
  EXPECT_FALSE(fs::exists(*bert / ".tide"));
}

TEST(ServeHfModelTest, DecoderCausalLmFolderWithTaskRerankIsExportedWithItsPrompt) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(kQwen3Tokenizer);
  TempDir tmp;
  // The whole Qwen3 vocabulary, so that any text the tokenizer encodes is a valid input.
  auto folder = TinyDecoderFolder(tmp.path(), "qwen3-tiny-causal", 151936,
                                  fs::absolute(*tide::testing::SharedAsset(kQwen3Tokenizer)));
  ASSERT_TRUE(folder.ok()) << folder.status();
  auto server = Serve({"--model", folder->string(), "--task", "rerank", "--log-level", "warn", "--export-script",
                       (SourceDir() / "tools" / "export_model.py").string()});
  const fs::path entry = *folder / ".tide" / "qwen3-tiny-causal";
  ASSERT_TRUE(fs::is_regular_file(entry / "1" / "model.onnx")) << (server.ok() ? "" : server.status().ToString());
  std::ifstream in(entry / "config.pbtxt");
  const std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(config, HasSubstr("key: \"prompt_template\""));
  EXPECT_THAT(config, HasSubstr("<|im_start|>system\\nJudge whether the Document meets the requirements"));
  EXPECT_THAT(config, HasSubstr("key: \"score_activation\"\n  value { string_value: \"sigmoid\" }"));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->Stderr(), HasSubstr("verified: ONNX Runtime matches PyTorch"));
  const std::vector<double> scores = RerankScores(**server);
  for (double s : scores) EXPECT_TRUE(s > 0.0 && s < 1.0) << s;
  EXPECT_NE(scores[0], scores[1]) << "the model must tell the documents apart";

  // The model sees the prompt, not a BERT pair: /tokenize of a [query, document] pair starts with
  // the chat template's <|im_start|> (an added token of the Qwen3 vocabulary, id 151644) and holds
  // the instruction and the document (each token's text is its offsets' substring, without the
  // space before it, as HF's byte-level offsets are trimmed: so the words are compared without spaces).
  const json tokens = PostJson(**server, "/tokenize", {{"inputs", json::array({json::array({kQuery, kDocs[0]})})}});
  ASSERT_TRUE(tokens.is_array() && tokens.size() == 1 && tokens[0].is_array() && !tokens[0].empty()) << tokens;
  EXPECT_EQ(tokens[0][0].at("id").get<int64_t>(), 151644) << tokens[0][0];
  std::string rendered;
  for (const json& t : tokens[0]) rendered += t.value("text", "");
  auto no_spaces = [](std::string s) {
    s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
    return s;
  };
  EXPECT_THAT(rendered, HasSubstr("<|im_start|>user"));
  EXPECT_THAT(rendered, HasSubstr(no_spaces("<Instruct>: Given a web search query")));
  EXPECT_THAT(rendered, HasSubstr(no_spaces(std::string("<Document>: ") + kDocs[0]) + "<|im_end|>"));

  // A request's instruction is part of the prompt: another one changes the score; the default
  // written out gives the same score as none.
  auto first_score = [&](const json& extra) {
    json body = {{"query", kQuery}, {"texts", kDocs}};
    body.update(extra);
    const json out = PostJson(**server, "/rerank", body);
    for (const json& r : out) {
      if (r.at("index").get<size_t>() == 0) return r.at("score").get<double>();
    }
    return static_cast<double>(NAN);
  };
  EXPECT_NE(first_score({{"instruction", "Judge the documents by their first letter only"}}), scores[0]);
  EXPECT_DOUBLE_EQ(
      first_score({{"instruction", "Given a web search query, retrieve relevant passages that answer the query"}}),
      scores[0]);
}

TEST(ServeHfModelTest, RealThirdPartyExportAsAnHfFolder) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kBertBaseUncasedTokenizer);
  const fs::path model = fs::absolute(*tide::testing::SharedAsset(tide::testing::kTinyDistilBertModel));
  TempDir tmp;
  const fs::path folder = tmp.path() / "tiny-distilbert-classification";
  fs::create_directories(folder);
  // The asset folder has the top-level layout (model.onnx, config.json) but no tokenizer.json:
  // the model uses bert-base-uncased's vocabulary, whose tokenizer.json is another asset.
  fs::create_symlink(model, folder / "model.onnx");
  fs::copy_file(model.parent_path() / "config.json", folder / "config.json");
  fs::copy_file(*tide::testing::SharedAsset(tide::testing::kBertBaseUncasedTokenizer), folder / "tokenizer.json");

  auto server = Serve({"--model", folder.string(), "--log-level", "info"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->Stdout(), HasSubstr("task classify, score = P(label 'POSITIVE')"));
  // SOURCE.txt's reference logits for the panda pair: [0.00032029501744545996, -0.00020017904171254486].
  const json out = PostJson(**server, "/rerank",
                            {{"query", "what is panda?"},
                             {"texts", {"The giant panda is a bear species endemic to China."}},
                             {"raw_scores", true}});
  ASSERT_TRUE(out.is_array() && out.size() == 1) << out.dump();
  EXPECT_NEAR(out[0]["score"].get<double>(), -0.00020017904171254486, 1e-5) << "raw score: the last label's logit";
  const json prob = PostJson(**server, "/rerank",
                             {{"query", "what is panda?"},
                              {"texts", {"The giant panda is a bear species endemic to China."}}});
  ASSERT_TRUE(prob.is_array() && prob.size() == 1) << prob.dump();
  // 2 labels (id2label NEGATIVE, POSITIVE): task classify, score = softmax P(POSITIVE).
  const double p = 1.0 / (1.0 + std::exp(0.00032029501744545996 - -0.00020017904171254486));
  EXPECT_NEAR(prob[0]["score"].get<double>(), p, 1e-5);
  // TEI's /predict and Triton's classification name the labels from config.json's id2label.
  const json predict = PostJson(**server, "/predict",
                                {{"inputs", {"what is panda?", "The giant panda is a bear species endemic to China."}}});
  ASSERT_TRUE(predict.is_array() && predict.size() == 2) << predict.dump();
  EXPECT_EQ(predict[0]["label"], "NEGATIVE") << predict.dump();  // the larger logit first
  EXPECT_NEAR(predict[1]["score"].get<double>(), p, 1e-5) << predict.dump();
  EXPECT_EQ(predict[1]["label"], "POSITIVE");
  const json top = PostJson(**server, "/v2/models/tiny-distilbert-classification/infer",
                            {{"inputs", {{{"name", "text"}, {"shape", {1}}, {"datatype", "BYTES"}, {"data", {"what is panda?"}}},
                                         {{"name", "text_pair"}, {"shape", {1}}, {"datatype", "BYTES"},
                                          {"data", {"The giant panda is a bear species endemic to China."}}}}},
                             {"outputs", {{{"name", "logits"}, {"parameters", {{"classification", 1}}}}}}});
  ASSERT_TRUE(top.contains("outputs")) << top.dump();
  EXPECT_THAT(top["outputs"][0]["data"][0].get<std::string>(), ::testing::EndsWith(":0:NEGATIVE")) << top.dump();
}

}  // namespace
}  // namespace tide::blackbox
