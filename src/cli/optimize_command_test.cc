#include "cli/optimize_command.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/ort_backend.h"
#include "shared_assets.h"

namespace tide::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class OptimizeCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tide_optimize_cmd_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(OptimizeCommandTest, FusesMiniLmChecksAndWritesAModelThatLoads) {
  const fs::path in = tide::testing::SourceRoot() / "models/minilm-l6/1/model.onnx";
  if (!fs::exists(in)) GTEST_SKIP() << in << " is absent";
  OptimizeCommandOptions o;
  o.input = in.string();
  o.output = (dir_ / "fused.onnx").string();
  std::ostringstream out;
  ASSERT_TRUE(RunOptimize(o, out).ok()) << out.str();
  EXPECT_THAT(out.str(), HasSubstr("fused 6 attention, 12 skip-layernorm"));
  EXPECT_THAT(out.str(), HasSubstr("check: max |fused - original|"));
  EXPECT_THAT(out.str(), HasSubstr("skipped /bert/embeddings/LayerNorm"));  // why the embedding LN stays
  auto sig = runtime::OrtBackend::ReadSignature(o.output);
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_EQ(sig->num_labels, 1);

  // The fused output is refused as input: it is already fused.
  OptimizeCommandOptions again = o;
  again.input = o.output;
  again.output = (dir_ / "twice.onnx").string();
  std::ostringstream out2;
  absl::Status s = RunOptimize(again, out2);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_FALSE(fs::exists(again.output));
}

TEST_F(OptimizeCommandTest, RefusesToOverwriteItsInput) {
  OptimizeCommandOptions o;
  o.input = (dir_ / "m.onnx").string();
  o.output = o.input;
  std::ostringstream out;
  EXPECT_EQ(RunOptimize(o, out).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(OptimizeCommandTest, NothingMatchedWritesNothing) {
  // The third-party DistilBERT export masks scores with Where and decomposes LayerNorm (opset 11).
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  const fs::path in = tide::testing::SharedAssetPath(tide::testing::kTinyDistilBertModel);
  OptimizeCommandOptions o;
  o.input = in.string();
  o.output = (dir_ / "out.onnx").string();
  std::ostringstream out;
  absl::Status s = RunOptimize(o, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(out.str(), HasSubstr("fused 0 attention, 0 skip-layernorm"));
  EXPECT_THAT(out.str(), HasSubstr("attention not fused"));
  EXPECT_FALSE(fs::exists(o.output));
}

}  // namespace
}  // namespace tide::cli
