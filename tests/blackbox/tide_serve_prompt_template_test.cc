// Black-box test of prompt templates (decoder-only rerankers' `prompt_template` /
// `default_instruction`, docs/prompt-templates.md) against the real binary, on the exported tiny
// BERT with a template whose markers are plain words (its tokenizer has no chat special tokens):
// /tokenize of a [query, document] pair shows the rendered prompt's tokens (no [CLS]/[SEP]); the
// instruction changes the score on /rerank, /v1/rerank, /predict and KServe text tensors, the
// default instruction is the one a request without it gets; truncation cuts only the document
// (the template's last word stays); chunk_max windows the document inside the template; an
// instruction the model cannot take, a missing one and one too long for the model are 422 naming
// `instruction`. The encoding itself is unit-tested against HF's tokenizers
// (src/tokenizer/prompt_encoder_test.cc).
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "blackbox_support.h"
#include "gtest/gtest.h"
#include "http_client.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using tide::testing::ClientResponse;

constexpr char kTemplate[] = "instruction : {instruction} query : {query} document : {document} end";
constexpr char kDefaultInstruction[] = "judge the relevance";

std::string Words(size_t n) {
  const char* words[] = {"the", "river", "flows", "past", "a", "quiet", "town", "near", "hills"};
  std::string out;
  for (size_t i = 0; i < n; ++i) out += std::string(i ? " " : "") + words[i % 9];
  return out;
}

std::string Param(const std::string& key, const std::string& value) {
  return "parameters { key: \"" + key + "\" value { string_value: " + json(value).dump() + " } }\n";
}

// "a-prompt" (the default model: first by name) has the template and a default instruction;
// "b-bert" is a plain cross-encoder; "c-needs" has the template and no default instruction.
class ServePromptTemplateTest : public SharedServerSuite<ServePromptTemplateTest> {
 protected:
  static void SetUpTestSuite() {
    StartSharedServer(
        [](const fs::path& repository) -> absl::Status {
          if (absl::Status s = AddTinyBert(repository, "a-prompt",
                                           TinyBertConfig(Param("prompt_template", kTemplate) +
                                                          Param("default_instruction", kDefaultInstruction)));
              !s.ok()) {
            return s;
          }
          if (absl::Status s = AddTinyBert(repository, "b-bert", TinyBertConfig()); !s.ok()) return s;
          return AddTinyBert(repository, "c-needs", TinyBertConfig(Param("prompt_template", kTemplate)));
        },
        {"--log-level", "warn"});
  }
  static std::vector<int64_t> Ids(const ClientResponse& r, size_t input = 0) {
    std::vector<int64_t> ids;
    const json tokens = ParseJson(r.body);
    if (!tokens.is_array() || tokens.size() <= input || !tokens[input].is_array()) {
      ADD_FAILURE() << "not a tokenize answer: " << r.body;
      return ids;
    }
    for (const json& t : tokens[input]) ids.push_back(t.value("id", int64_t{-1}));
    return ids;
  }
  static double Score(const ClientResponse& r, size_t index) {
    for (const json& item : ParseJson(r.body)) {
      if (item["index"] == index) return item["score"].get<double>();
    }
    return -1000;
  }
  static std::string Rendered(const std::string& instruction, const std::string& query, const std::string& doc) {
    return "instruction : " + instruction + " query : " + query + " document : " + doc + " end";
  }
};

TEST_F(ServePromptTemplateTest, TokenizeShowsTheRenderedPrompt) {
  auto client = NewClient();
  const json pair_input = json::array({json::array({"a town by the river", "quiet hills"})});
  const ClientResponse pair = client->Post("/tokenize", json{{"inputs", pair_input}}.dump());
  ASSERT_EQ(pair.status, 200) << pair.body;
  const ClientResponse plain = client->Post(
      "/tokenize", json{{"inputs", Rendered(kDefaultInstruction, "a town by the river", "quiet hills")},
                        {"add_special_tokens", false}}.dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(Ids(pair), Ids(plain));
  // No special token around the prompt; offsets are into the rendered prompt, first to last byte.
  const json tokens = ParseJson(pair.body)[0];
  for (const json& t : tokens) EXPECT_FALSE(t["special"].get<bool>()) << pair.body;
  EXPECT_EQ(tokens[0]["start"], 0) << pair.body;
  EXPECT_EQ(tokens.back()["stop"], Rendered(kDefaultInstruction, "a town by the river", "quiet hills").size())
      << pair.body;

  const ClientResponse other = client->Post(
      "/tokenize", json{{"inputs", pair_input}, {"instruction", "find towns"}}.dump());
  ASSERT_EQ(other.status, 200) << other.body;
  const ClientResponse other_plain = client->Post(
      "/tokenize", json{{"inputs", Rendered("find towns", "a town by the river", "quiet hills")},
                        {"add_special_tokens", false}}.dump());
  EXPECT_EQ(Ids(other), Ids(other_plain));

  // A long document: cut to max_sequence_length (64), the frame and the closing word kept.
  const ClientResponse cut =
      client->Post("/tokenize", json{{"inputs", json::array({json::array({"a town", Words(200)})})}}.dump());
  ASSERT_EQ(cut.status, 200) << cut.body;
  const json cut_tokens = ParseJson(cut.body)[0];
  EXPECT_EQ(cut_tokens.size(), 64u);
  EXPECT_EQ(cut_tokens[0]["start"], 0) << cut.body;
  EXPECT_EQ(cut_tokens.back()["stop"], Rendered(kDefaultInstruction, "a town", Words(200)).size()) << cut.body;
}

TEST_F(ServePromptTemplateTest, TheInstructionChangesTheScore) {
  auto client = NewClient();
  const std::vector<std::string> docs = {"quiet hills near the river", "a town"};
  auto rerank = [&](std::optional<std::string> instruction) {
    json body = {{"query", "a town by the river"}, {"texts", docs}, {"raw_scores", true}};
    if (instruction.has_value()) body["instruction"] = *instruction;
    const ClientResponse r = client->Post("/rerank", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return std::vector<double>{Score(r, 0), Score(r, 1)};
  };
  const std::vector<double> by_default = rerank(std::nullopt);
  EXPECT_EQ(rerank(std::string(kDefaultInstruction)), by_default);
  const std::vector<double> other = rerank(std::string("find quiet hills"));
  EXPECT_NE(other, by_default);

  // Cohere: the same prompt, the same raw relevance (Cohere answers sigmoid scores).
  const ClientResponse cohere = client->Post(
      "/v1/rerank", json{{"model", "a-prompt"}, {"query", "a town by the river"}, {"documents", {docs[0]}},
                         {"instruction", "find quiet hills"}}.dump());
  ASSERT_EQ(cohere.status, 200) << cohere.body;
  EXPECT_NEAR(ParseJson(cohere.body)["results"][0]["relevance_score"].get<double>(),
              1.0 / (1.0 + std::exp(-other[0])), 1e-5);

  // /predict of a pair is its prompt too.
  auto predict = [&](const std::string& instruction) {
    const ClientResponse r = client->Post(
        "/predict", json{{"inputs", json::array({"a town by the river", docs[0]})}, {"instruction", instruction},
                         {"raw_scores", true}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return ParseJson(r.body)[0]["score"].get<double>();
  };
  EXPECT_NEAR(predict(kDefaultInstruction), by_default[0], 1e-5);
  EXPECT_NEAR(predict("find quiet hills"), other[0], 1e-5);

  // KServe v2 text tensors: each (text, text_pair) row is the prompt, parameters.instruction its
  // instruction; the raw logits are /rerank's raw scores.
  auto infer = [&](const json& parameters) {
    json body = {{"inputs", json::array({{{"name", "text"}, {"shape", {2}}, {"datatype", "BYTES"},
                                          {"data", {"a town by the river", "a town by the river"}}},
                                         {{"name", "text_pair"}, {"shape", {2}}, {"datatype", "BYTES"},
                                          {"data", docs}}})}};
    if (!parameters.is_null()) body["parameters"] = parameters;
    return client->Post("/v2/models/a-prompt/infer", body.dump());
  };
  const ClientResponse kserve_default = infer(nullptr);
  ASSERT_EQ(kserve_default.status, 200) << kserve_default.body;
  const std::vector<double> default_logits = ParseJson(kserve_default.body)["outputs"][0]["data"];
  EXPECT_NEAR(default_logits[0], by_default[0], 1e-5);
  EXPECT_NEAR(default_logits[1], by_default[1], 1e-5);
  const ClientResponse kserve_other = infer(json{{"instruction", "find quiet hills"}});
  ASSERT_EQ(kserve_other.status, 200) << kserve_other.body;
  const std::vector<double> other_logits = ParseJson(kserve_other.body)["outputs"][0]["data"];
  EXPECT_NEAR(other_logits[0], other[0], 1e-5);
  const ClientResponse kserve_bad = infer(json{{"instruction", 3}});
  EXPECT_EQ(kserve_bad.status, 422) << kserve_bad.body;
}

TEST_F(ServePromptTemplateTest, LongDocumentsAreCutOrWindowedInsideTheTemplate) {
  auto client = NewClient();
  auto rerank = [&](const char* mode) {
    const ClientResponse r = client->Post(
        "/rerank", json{{"query", "a town"}, {"texts", {"quiet hills", Words(150)}}, {"raw_scores", true},
                        {"long_documents", mode}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return std::vector<double>{Score(r, 0), Score(r, 1)};
  };
  const std::vector<double> cut = rerank("truncate");
  const std::vector<double> best = rerank("chunk_max");
  EXPECT_EQ(best[0], cut[0]);  // the short document: one window, the same prompt
  EXPECT_NE(best[1], cut[1]);
  const ClientResponse refused = client->Post(
      "/rerank", json{{"query", "a town"}, {"texts", {Words(150)}}, {"truncate", false}}.dump());
  EXPECT_EQ(refused.status, 422) << refused.body;
}

TEST_F(ServePromptTemplateTest, InstructionErrorsAre422NamingIt) {
  auto client = NewClient();
  auto expect_422 = [&](const ClientResponse& r, const std::string& words) {
    EXPECT_EQ(r.status, 422) << r.body;
    EXPECT_NE(r.body.find("instruction"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find(words), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("validation"), std::string::npos) << r.body;
  };
  // A cross-encoder takes no instruction.
  expect_422(client->Post("/v1/rerank", json{{"model", "b-bert"}, {"query", "q"}, {"documents", {"d"}},
                                             {"instruction", "x"}}.dump()),
             "no prompt_template");
  // A template with {instruction} and no default needs one.
  expect_422(client->Post("/v1/rerank", json{{"model", "c-needs"}, {"query", "q"}, {"documents", {"d"}}}.dump()),
             "no default_instruction");
  const ClientResponse given = client->Post(
      "/v1/rerank", json{{"model", "c-needs"}, {"query", "q"}, {"documents", {"d"}}, {"instruction", "x"}}.dump());
  EXPECT_EQ(given.status, 200) << given.body;
  // An instruction that leaves the document no room: the counts and the part named.
  expect_422(client->Post("/rerank", json{{"query", "q"}, {"texts", {"d"}}, {"instruction", Words(80)}}.dump()),
             "the instruction is too long");
  const ClientResponse wrong_type =
      client->Post("/rerank", json{{"query", "q"}, {"texts", {"d"}}, {"instruction", 3}}.dump());
  EXPECT_EQ(wrong_type.status, 422) << wrong_type.body;
  EXPECT_NE(wrong_type.body.find("instruction"), std::string::npos) << wrong_type.body;
}

// A template written for another tokenizer (ChatML's <|im_start|> on a WordPiece vocabulary), or
// whose frame with the default instruction fills max_sequence_length, is refused at load: the
// server does not start, and says which parameter and why.
TEST(ServePromptTemplateLoadTest, ATemplateTheTokenizerCannotServeIsRefusedAtLoad) {
  struct Case {
    std::string config, expected;
  };
  const std::vector<Case> cases = {
      {TinyBertConfig(Param("prompt_template", "<|im_start|>user {query} {document}<|im_end|>")),
       "spells the special token <|im_start|> but the tokenizer has no such token"},
      {TinyBertConfig(Param("prompt_template", kTemplate) + Param("default_instruction", Words(600))),
       "leaves no room for the document: the instruction is too long"},
  };
  for (const Case& c : cases) {
    TempDir repo;
    ASSERT_TRUE(AddTinyBert(repo.path(), "wrong", c.config).ok());
    // (A server that wrongly started would be stopped by timeout: exit 124.)
    auto run = RunCommand({"/usr/bin/timeout", "60", TideBinary().string(), "serve", "--model-repository",
                           repo.path().string(), "--port", "0", "--log-level", "warn"});
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->exit_code, 1) << run->output;
    EXPECT_NE(run->output.find("parameters[\"prompt_template\"]: " ), std::string::npos) << run->output;
    EXPECT_NE(run->output.find(c.expected), std::string::npos) << run->output;
  }
}

}  // namespace
}  // namespace tide::blackbox
