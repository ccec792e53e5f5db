#include "cli/quantize_command.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/ort_backend.h"
#include "shared_assets.h"

namespace tide::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class QuantizeCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tide_quantize_cmd_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(QuantizeCommandTest, Int8AndFp16OfTheSharedDistilBertLoadInOnnxRuntime) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  const fs::path in = tide::testing::SharedAssetPath(tide::testing::kTinyDistilBertModel);
  for (bool int8 : {true, false}) {
    QuantizeCommandOptions o;
    o.input = in.string();
    o.output = (dir_ / (int8 ? "int8.onnx" : "fp16.onnx")).string();
    o.int8 = int8;
    o.fp16 = !int8;
    o.fp16_options.mode = quantize::Fp16Mode::kWeightsOnly;
    std::ostringstream out;
    ASSERT_TRUE(RunQuantize(o, out).ok());
    // 12 weight MatMuls in the encoder; pre_classifier and classifier Gemms stay FP32.
    EXPECT_THAT(out.str(), HasSubstr("12 nodes converted, 2 skipped"));
    EXPECT_THAT(out.str(), HasSubstr("skipped Gemm_189: excluded by name pattern"));
    auto backend = runtime::OrtBackend::Create({.model_path = o.output, .intra_op_threads = 1});
    EXPECT_TRUE(backend.ok()) << backend.status();
  }
}

TEST_F(QuantizeCommandTest, AnAlreadyQuantizedModelIsRefusedAndNothingIsWritten) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  const fs::path in = tide::testing::SharedAssetPath(tide::testing::kTinyDistilBertModel);
  QuantizeCommandOptions o;
  o.input = in.string();
  o.output = (dir_ / "int8.onnx").string();
  o.int8 = true;
  std::ostringstream out;
  ASSERT_TRUE(RunQuantize(o, out).ok());
  for (bool int8 : {true, false}) {
    QuantizeCommandOptions again;
    again.input = o.output;
    again.output = (dir_ / "again.onnx").string();
    again.int8 = int8;
    again.fp16 = !int8;
    absl::Status s = RunQuantize(again, out);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(), HasSubstr(again.input));
    EXPECT_THAT(s.message(), HasSubstr("already quantized"));
    EXPECT_THAT(s.message(), HasSubstr("is DynamicQuantizeMatMul; quantize the FP32 model instead"));
    EXPECT_FALSE(fs::exists(again.output));
  }
}

TEST_F(QuantizeCommandTest, ClearErrors) {
  std::ofstream(dir_ / "garbage.onnx") << "not a model";
  QuantizeCommandOptions o;
  o.input = (dir_ / "garbage.onnx").string();
  o.output = (dir_ / "out.onnx").string();
  o.int8 = true;
  std::ostringstream out;
  absl::Status s = RunQuantize(o, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("garbage.onnx"));
  EXPECT_FALSE(fs::exists(dir_ / "out.onnx"));

  std::ofstream(dir_ / "empty.onnx") << "";  // parses as a ModelProto without a graph
  o.input = (dir_ / "empty.onnx").string();
  s = RunQuantize(o, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("empty.onnx"));
  EXPECT_THAT(s.message(), HasSubstr("no graph"));
  EXPECT_FALSE(fs::exists(dir_ / "out.onnx"));

  o.fp16 = true;  // both
  EXPECT_THAT(RunQuantize(o, out).message(), HasSubstr("exactly one"));
  o.fp16 = false;
  o.output = o.input;
  EXPECT_THAT(RunQuantize(o, out).message(), HasSubstr("overwrite"));
}

}  // namespace
}  // namespace tide::cli
