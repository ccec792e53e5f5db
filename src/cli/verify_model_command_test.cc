#include "cli/verify_model_command.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared_assets.h"

namespace tide::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

fs::path DistilBertModel() {
  return tide::testing::SharedAssetPath(tide::testing::kTinyDistilBertModel);
}

constexpr char kPandaIds[] =
    "[101,2054,2003,25462,1029,102,1996,5016,25462,2003,1037,4562,2427,7320,2000,2859,1012,102]";
constexpr char kPandaMask[] = "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]";

class VerifyModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
    std::random_device rd;
    ref_ = fs::temp_directory_path() / ("tide_verify_" + std::to_string(rd()) + ".json");
  }
  void TearDown() override { fs::remove(ref_); }

  // One case with the panda pair; the reference logits from SOURCE.txt, shifted by `delta`.
  void WriteReference(double delta, bool with_types = true) {
    std::ofstream out(ref_);
    out.precision(17);
    out << "{\"cases\": [{\"inputs\": {\"input_ids\": [" << kPandaIds << "], \"attention_mask\": ["
        << kPandaMask << "]";
    if (with_types) out << ", \"token_type_ids\": [[0,0,0,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1]]";
    out << "}, \"logits\": [[" << 0.00032029501744545996 + delta << ", " << -0.00020017904171254486
        << "]]}, {\"inputs\": {\"input_ids\": [" << kPandaIds << ", " << kPandaIds
        << "], \"attention_mask\": [" << kPandaMask << ", " << kPandaMask << "]}, \"logits\": [["
        << 0.00032029501744545996 << ", " << -0.00020017904171254486 << "], ["
        << 0.00032029501744545996 << ", " << -0.00020017904171254486 << "]]}]}";
  }

  int RunCli(double atol) {
    CLI::App app;
    RegisterVerifyModelCommand(&app);
    std::vector<std::string> args = {"verify-model", "--model", DistilBertModel().string(), "--reference",
                                     ref_.string(), "--atol", std::to_string(atol)};
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    try {
      app.parse(reversed);
    } catch (const CLI::Error& e) {
      return e.get_exit_code();
    }
    return 0;
  }

  fs::path ref_;
};

TEST_F(VerifyModelTest, MatchesReferenceLogits) {
  WriteReference(0.0);
  std::ostringstream out;
  auto diff = VerifyModel({.model = DistilBertModel().string(), .reference = ref_.string()}, out);
  ASSERT_TRUE(diff.ok()) << diff.status();
  EXPECT_LT(*diff, 1e-5);
  EXPECT_THAT(out.str(), HasSubstr("case 0: batch 1 x 18"));
  EXPECT_THAT(out.str(), HasSubstr("case 1: batch 2 x 18"));
  EXPECT_THAT(out.str(), HasSubstr(": OK"));
  EXPECT_EQ(RunCli(1e-4), 0);
}

TEST_F(VerifyModelTest, ReportsDifferenceAboveAtol) {
  WriteReference(0.01);
  std::ostringstream out;
  auto diff = VerifyModel({.model = DistilBertModel().string(), .reference = ref_.string()}, out);
  ASSERT_TRUE(diff.ok()) << diff.status();
  EXPECT_NEAR(*diff, 0.01, 1e-5);
  EXPECT_THAT(out.str(), HasSubstr("ABOVE ATOL"));
  EXPECT_EQ(RunCli(1e-4), 1);
  EXPECT_EQ(RunCli(0.1), 0);
}

TEST_F(VerifyModelTest, MalformedReference) {
  for (const char* text : {
           "not json",
           "{\"cases\": []}",
           "{\"cases\": [{\"inputs\": {\"input_ids\": [[1,2],[3]], \"attention_mask\": [[1,1],[1]]}, \"logits\": [[0,0],[0,0]]}]}",
           "{\"cases\": [{\"inputs\": {\"input_ids\": [[101,102]]}, \"logits\": [[0,0]]}]}",
           "{\"cases\": [{\"inputs\": {\"input_ids\": [[101,102]], \"attention_mask\": [[1,1]]}, \"logits\": [[0,0,0]]}]}",
           "{\"cases\": [{\"inputs\": {\"input_ids\": [[101,102]], \"attention_mask\": [[1,1]]}, \"logits\": [[\"a\",0]]}]}",
       }) {
    std::ofstream(ref_) << text;
    std::ostringstream out;
    auto diff = VerifyModel({.model = DistilBertModel().string(), .reference = ref_.string()}, out);
    ASSERT_FALSE(diff.ok()) << text;
    EXPECT_EQ(diff.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(diff.status().message(), HasSubstr(ref_.string())) << text;
    EXPECT_EQ(RunCli(1e-4), 2) << text;
  }
}

}  // namespace
}  // namespace tide::cli
