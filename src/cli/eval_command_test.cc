#include "cli/eval_command.h"

#include <filesystem>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared_assets.h"

namespace tide::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

fs::path DistilBert() {
  return tide::testing::SharedAssetPath(tide::testing::kTinyDistilBertModel);
}

EvalOptions Small(const std::string& model) {
  EvalOptions o;
  o.model = model;
  o.queries = 2;
  o.min_docs = 16;
  o.max_docs = 20;
  o.max_length = 64;
  return o;
}

TEST(EvalCommandTest, AVariantIdenticalToTheReferenceAgreesPerfectly) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  EvalOptions o = Small(DistilBert().string());
  o.variants = {{"same", DistilBert().string()}};
  std::ostringstream out;
  ASSERT_TRUE(RunEval(o, out).ok());
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("2 queries"));
  const size_t row = text.find("| same |");
  ASSERT_NE(row, std::string::npos) << text;
  const std::string line = text.substr(row, text.find('\n', row) - row);
  // Same model, same batches: scores equal, so every agreement metric is perfect.
  EXPECT_THAT(line, HasSubstr("| 0.00e+00 | 0.00e+00 | 1.0000 / 1.0000 | 1.0000 / 1.0000 | 100.0% | 100.0% | 1.0000 / 1.0000 |"));
}

// A served variant runs the graph tide serve would (fused at load) and says how it was fused.
TEST(EvalCommandTest, AServedVariantIsFusedAsTheLoadFusesIt) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  EvalOptions o = Small(DistilBert().string());
  o.served_variants = {{"served", DistilBert().string()}, {"served-fp32", DistilBert().string()}};
  o.attention_precision = {{"served-fp32", "fp32"}};
  std::ostringstream out;
  ASSERT_TRUE(RunEval(o, out).ok());
  const std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("| served |"));
  EXPECT_THAT(text, HasSubstr("| served-fp32 |"));
  EXPECT_THAT(text, HasSubstr("served: served as tide serve fuses it: "));
  EXPECT_THAT(text, HasSubstr("served-fp32: served as tide serve fuses it: "));
  // An FP32 model keeps FP32 attention under auto.
  EXPECT_THAT(text, ::testing::Not(HasSubstr("BF16")));

  EvalOptions unknown = o;
  unknown.attention_precision = {{"nobody", "fp32"}};
  EXPECT_EQ(RunEval(unknown, out).code(), absl::StatusCode::kInvalidArgument);
  EvalOptions bad = o;
  bad.attention_precision = {{"served", "fp16"}};
  const absl::Status s = RunEval(bad, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("not auto, fp32 or bf16"));
}

// A served variant runs its last layer on the pooled token, as the load does (prune_last_layer),
// unless --whole-last-layer names it; its row says which.
TEST(EvalCommandTest, WholeLastLayerNamesServedVariants) {
  const fs::path minilm = tide::testing::SourceRoot() / "models/minilm-l6/1/model.onnx";
  if (!fs::exists(minilm)) GTEST_SKIP() << minilm << " is absent";
  EvalOptions o = Small(minilm.string());
  o.served_variants = {{"pruned", minilm.string()}, {"whole", minilm.string()}};
  o.whole_last_layer = {"whole"};
  std::ostringstream out;
  const absl::Status status = RunEval(o, out);
  ASSERT_TRUE(status.ok()) << status;
  const std::string text = out.str();
  const size_t pruned = text.find("pruned: served as tide serve fuses it: ");
  const size_t whole = text.find("whole: served as tide serve fuses it: ");
  ASSERT_NE(pruned, std::string::npos) << text;
  ASSERT_NE(whole, std::string::npos) << text;
  const std::string pruned_line = text.substr(pruned, text.find('\n', pruned) - pruned);
  const std::string whole_line = text.substr(whole, text.find('\n', whole) - whole);
  if (pruned_line.find("tide kernel") == std::string::npos) GTEST_SKIP() << "no AVX-512 here: " << pruned_line;
  EXPECT_THAT(pruned_line, HasSubstr("last layer on the pooled token (8 nodes)"));
  EXPECT_THAT(whole_line, ::testing::Not(HasSubstr("pooled token")));

  EvalOptions unknown = o;
  unknown.whole_last_layer = {"nobody"};
  const absl::Status s = RunEval(unknown, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--whole-last-layer nobody: no --served-variant has that label"));
}

TEST(EvalCommandTest, Errors) {
  std::ostringstream out;
  EvalOptions bad = Small("model.onnx");
  bad.max_docs = 3;  // below min_docs
  EXPECT_EQ(RunEval(bad, out).code(), absl::StatusCode::kInvalidArgument);
  EvalOptions missing = Small("does/not/exist.onnx");
  EXPECT_FALSE(RunEval(missing, out).ok());
}

}  // namespace
}  // namespace tide::cli
