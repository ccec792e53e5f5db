// Black-box tests of load-time graph fusion (config parameter graph_fusion, src/optimize) against
// the real `tide serve`: tools/export_model.py's tiny-bert, FP32 and `tide quantize --int8`, each
// served three times from one repository — with the default graph_fusion (auto; attention on
// tide's kernel where the CPU has AVX-512, the last layer on the pooled token), with
// attention_kernel "onnxruntime", and with "off"; and FP32 once more with prune_last_layer false.
//   - the server logs what it fused and the probe check's difference for the auto entries, and
//     nothing of the kind for the "off" ones;
//   - fused and unfused entries answer the same padded KServe batch (rows of mixed lengths) with the
//     same logits: within 1e-4 for FP32, within 2e-2 x the logit scale for INT8 (the load-time
//     check's bound: per-batch activation quantization turns float rounding into whole steps).
#include <linux/magic.h>
#include <sys/vfs.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "blackbox_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_client.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Config(bool fusion, bool ort_kernels = false, bool whole_last_layer = false) {
  return absl::StrCat("backend: \"onnxruntime\"\nmax_batch_size: 16\n",
                      "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n",
                      fusion ? "" : "parameters { key: \"graph_fusion\" value { string_value: \"off\" } }\n",
                      ort_kernels ? "parameters { key: \"attention_kernel\" value { string_value: \"onnxruntime\" } }\n"
                                      "parameters { key: \"elementwise_kernel\" value { string_value: \"onnxruntime\" } }\n"
                                    : "",
                      whole_last_layer ? "parameters { key: \"prune_last_layer\" value { string_value: \"false\" } }\n"
                                       : "");
}

// What the default load writes for tiny-bert (heads of 16): tide's kernel needs AVX-512.
bool TideKernelHere() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"); }
// attention_precision auto: an INT8 model's attention multiplies in BF16 where the CPU can.
bool Bf16Here() {
  return TideKernelHere() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bf16");
}

class ServeFusionTest : public SharedServerSuite<ServeFusionTest> {
 protected:
  static void SetUpTestSuite() { StartSharedServer(Prepare, {"--log-level", "info"}); }

  static absl::Status Prepare(const fs::path& repo) {
    auto tiny = ExportedTinyBert();
    if (!tiny.ok()) return tiny.status();
    const fs::path fp32 = *tiny / "1" / "model.onnx";
    const fs::path tokenizer = *tiny / "tokenizer.json";
    const fs::path int8 = scratch_dir() / "int8.onnx";
    auto run = RunCommand({TideBinary().string(), "quantize", "--int8", fp32.string(), int8.string()});
    if (!run.ok()) return run.status();
    if (run->exit_code != 0) return absl::InternalError(absl::StrCat("tide quantize exited ", run->exit_code, ": ", run->output));
    for (const auto& [name, model, fusion] : {std::tuple{"fp32-fused", fp32, true}, std::tuple{"fp32-plain", fp32, false},
                                              std::tuple{"int8-fused", int8, true}, std::tuple{"int8-plain", int8, false}}) {
      if (absl::Status s = AddModel(repo, name, model, tokenizer, Config(fusion)); !s.ok()) return s;
    }
    for (const auto& [name, model] : {std::pair{"fp32-ort", fp32}, std::pair{"int8-ort", int8}}) {
      if (absl::Status s = AddModel(repo, name, model, tokenizer, Config(true, true)); !s.ok()) return s;
    }
    if (absl::Status s = AddModel(repo, "fp32-whole", fp32, tokenizer, Config(true, false, true)); !s.ok()) return s;
    return absl::OkStatus();
  }

  // Rows of different lengths ([CLS] random ids [SEP], padded with 0 / mask 0) as KServe tensors.
  static json PaddedInputs() {
    std::mt19937 rng(21);
    std::uniform_int_distribution<int64_t> token(1000, 2047);  // inside the tiny-bert vocabulary
    const int lengths[] = {40, 23, 9, 2};
    const int seq = 40;
    std::vector<int64_t> ids, mask, types;
    for (int len : lengths) {
      for (int t = 0; t < seq; ++t) {
        const bool real = t < len;
        ids.push_back(!real ? 0 : t == 0 ? 101 : t == len - 1 ? 102 : token(rng));
        mask.push_back(real);
        types.push_back(real && t >= len / 2);
      }
    }
    const json shape = {4, seq};
    return json::array({{{"name", "input_ids"}, {"shape", shape}, {"datatype", "INT64"}, {"data", ids}},
                        {{"name", "attention_mask"}, {"shape", shape}, {"datatype", "INT64"}, {"data", mask}},
                        {{"name", "token_type_ids"}, {"shape", shape}, {"datatype", "INT64"}, {"data", types}}});
  }

  std::vector<float> Infer(const std::string& model) {
    auto client = NewClient();
    const auto r = client->Post(absl::StrCat("/v2/models/", model, "/infer"), json{{"inputs", PaddedInputs()}}.dump());
    EXPECT_EQ(r.status, 200) << r.error << r.body;
    const json out = ParseJson(r.body);
    if (out.is_discarded() || !out.contains("outputs") || out["outputs"].empty()) {
      ADD_FAILURE() << "no outputs: " << r.body;
      return {};
    }
    return out["outputs"][0]["data"].get<std::vector<float>>();
  }

  static void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, double limit, const char* what) {
    ASSERT_EQ(a.size(), 4u) << what;
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], limit) << what << ", row " << i;
  }
};

TEST_F(ServeFusionTest, LogsWhatWasFusedOnlyForAutoEntries) {
  const std::string log = server().Stdout() + server().Stderr();  // spdlog writes to stdout
  for (const std::string name : {"fp32-fused", "int8-fused"}) {
    const char* kernel = !TideKernelHere()                        ? ""
                         : name == "int8-fused" && Bf16Here() ? " (tide kernel, BF16 products)"
                                                              : " (tide kernel)";
    // With tide's attention the last layer runs for the pooled [CLS] token alone (prune_last_layer).
    EXPECT_THAT(log, HasSubstr(absl::StrCat("model ", name, " version 1: graph fusion: 2 attention",
                                            kernel, ", 4 skip-layernorm",
                                            TideKernelHere() ? ", 2 bias-gelu + 5 layernorm on tide kernels, "
                                                               "last layer on the pooled token (8 nodes);"
                                                             : ";")));
  }
  EXPECT_THAT(log, HasSubstr(absl::StrCat("model fp32-whole version 1: graph fusion: 2 attention",
                                          TideKernelHere() ? " (tide kernel)" : "", ", 4 skip-layernorm",
                                          TideKernelHere() ? ", 2 bias-gelu + 5 layernorm on tide kernels;" : ";")));
  for (const char* name : {"fp32-ort", "int8-ort"}) {
    EXPECT_THAT(log, HasSubstr(absl::StrCat("model ", name, " version 1: graph fusion: 2 attention, 4 skip-layernorm;")));
  }
  EXPECT_THAT(log, HasSubstr("probe max |fused - original|"));
  for (const char* name : {"fp32-plain", "int8-plain"}) {
    EXPECT_THAT(log, Not(HasSubstr(absl::StrCat("model ", name, " version 1: graph fusion"))));
  }
  EXPECT_THAT(log, Not(HasSubstr("graph fusion rejected")));
  // Each fused graph's weights moved into its version's shared weights (the one copy every
  // session reads); the graph itself is a skeleton of a few KB: no fused model is written out.
  EXPECT_THAT(log, Not(HasSubstr("the fused graph stays in memory")));
  for (const char* name : {"fp32-fused", "int8-fused"}) {
    EXPECT_THAT(log, HasSubstr(absl::StrCat("model ", name, " version 1: fused graph ")));
  }
  EXPECT_THAT(log, HasSubstr("shared by every session"));
  int unnamed = 0;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(server().pid()) + "/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
    // O_TMPFILE in the temp directory: "/tmp/#<inode> (deleted)"
    if (!ec && target.rfind(std::filesystem::temp_directory_path().string() + "/#", 0) == 0 &&
        target.find("(deleted)") != std::string::npos) {
      ++unnamed;
    }
  }
  EXPECT_EQ(unnamed, 0) << "a fused model with shared weights needs no spill file";
  // The shared weights themselves live in unnamed files there (parameter weights_file), mapped but
  // with no descriptor left open.
  struct statfs fs {};
  if (::statfs(std::filesystem::temp_directory_path().c_str(), &fs) == 0 &&
      (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC)) {
    EXPECT_THAT(log, HasSubstr("memory file system"));  // refused, said, served from memory
    return;
  }
  EXPECT_THAT(log, HasSubstr("in an unnamed file in " + std::filesystem::temp_directory_path().string()));
  std::ifstream maps("/proc/" + std::to_string(server().pid()) + "/maps");
  std::string line;
  bool mapped = false;
  while (std::getline(maps, line)) {
    if (line.find(std::filesystem::temp_directory_path().string() + "/#") != std::string::npos &&
        line.find("(deleted)") != std::string::npos) {
      mapped = true;
    }
  }
  EXPECT_TRUE(mapped) << "no weights file mapped";
}

TEST_F(ServeFusionTest, FusedAndUnfusedAnswerTheSamePaddedBatch) {
  EXPECT_NO_FATAL_FAILURE(ExpectClose(Infer("fp32-fused"), Infer("fp32-plain"), 1e-4, "fp32"));
  EXPECT_NO_FATAL_FAILURE(ExpectClose(Infer("fp32-ort"), Infer("fp32-plain"), 1e-4, "fp32, ONNX Runtime's attention"));
  EXPECT_NO_FATAL_FAILURE(ExpectClose(Infer("fp32-whole"), Infer("fp32-plain"), 1e-4, "fp32, the last layer whole"));
  // The last layer on the pooled token computes the [CLS] row the whole layer computes.
  EXPECT_NO_FATAL_FAILURE(ExpectClose(Infer("fp32-fused"), Infer("fp32-whole"), 2e-5, "fp32, pooled token vs whole"));
  const std::vector<float> plain = Infer("int8-plain");
  ASSERT_FALSE(plain.empty());
  double scale = 1;
  for (float v : plain) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  EXPECT_NO_FATAL_FAILURE(ExpectClose(Infer("int8-fused"), plain, 2e-2 * scale, "int8"));
  EXPECT_NO_FATAL_FAILURE(ExpectClose(Infer("int8-ort"), plain, 2e-2 * scale, "int8, ONNX Runtime's attention"));
}

}  // namespace
}  // namespace tide::blackbox
