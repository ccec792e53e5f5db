// Black-box test of per-version identity: two versions of one model served
// side by side keep their own metrics and statistics. Before, per-model metric families were
// labelled by model name only, so the versions' gauges overwrote each other and mirrored counters
// kept the larger value instead of the sum.
//
// One repository, one server: `two` with versions 1 and 2 (the exported tiny-bert in both,
// `version_policy { all { } }`). The test sends a different number of requests to each version
// and checks every per-version family against its own count, and that the versions sum to the
// model's total.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "blackbox_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_client.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int kVersion1Requests = 3;
constexpr int kVersion2Requests = 5;

// The value of the sample whose name and labels are exactly `series` (e.g.
// `tide_queue_tasks{model="two",version="1"}`), or -1 when the exposition has no such line.
double Sample(const std::string& exposition, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::ConsumePrefix(&line, series) || line.empty() || line.front() != ' ') continue;
    double v = 0;
    if (absl::SimpleAtod(absl::StripAsciiWhitespace(line), &v)) return v;
  }
  return -1;
}

class ServeVersionsTest : public SharedServerSuite<ServeVersionsTest> {
 protected:
  static void SetUpTestSuite() {
    StartSharedServer(
        [](const fs::path& repo) -> absl::Status {
          auto tiny = ExportedTinyBert();
          if (!tiny.ok()) return tiny.status();
          const std::string config =
              "backend: \"onnxruntime\"\nmax_batch_size: 8\n"
              "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n"
              "version_policy { all { } }\n";
          if (absl::Status s = AddTinyBert(repo, "two", config); !s.ok()) return s;
          std::error_code ec;
          fs::create_directories(repo / "two" / "2", ec);
          if (!ec) fs::create_symlink(fs::absolute(*tiny / "1" / "model.onnx"), repo / "two" / "2" / "model.onnx", ec);
          if (ec) return absl::InternalError(absl::StrCat("cannot add version 2: ", ec.message()));
          return absl::OkStatus();
        },
        {"--log-level", "warn"});
  }
};

TEST_F(ServeVersionsTest, EachVersionHasItsOwnMetricsAndStatisticsAndTheySum) {
  auto client = NewClient();
  const std::string body = R"({"inputs": [
      {"name": "text", "shape": [2], "datatype": "BYTES", "data": ["what is a panda?", "what is a bear?"]},
      {"name": "text_pair", "shape": [2], "datatype": "BYTES", "data": ["a bear", "a city"]}]})";
  const std::map<std::string, int> sent = {{"1", kVersion1Requests}, {"2", kVersion2Requests}};
  for (const auto& [version, n] : sent) {
    for (int i = 0; i < n; ++i) {
      auto r = client->Post(absl::StrCat("/v2/models/two/versions/", version, "/infer"), body);
      ASSERT_EQ(r.status, 200) << r.error << r.body;
      EXPECT_EQ(ParseJson(r.body).value("model_version", ""), version);
    }
  }
  const std::string m = client->Get("/metrics").body;
  double infer_sum = 0;
  for (const auto& [version, n] : sent) {
    SCOPED_TRACE(absl::StrCat("version ", version));
    const std::string labels = absl::StrCat(R"(model="two",version=")", version, R"(")");
    const double requests =
        Sample(m, absl::StrCat("tide_requests_total{", labels, R"(,endpoint="infer",status="200",protocol="http"})"));
    EXPECT_EQ(requests, n);
    infer_sum += requests;
    EXPECT_EQ(Sample(m, absl::StrCat("tide_request_duration_seconds_count{", labels, R"(,endpoint="infer",protocol="http"})")), n);
    EXPECT_EQ(Sample(m, absl::StrCat("tide_stage_duration_seconds_count{", labels, R"(,stage="inference"})")), n);
    EXPECT_EQ(Sample(m, absl::StrCat("tide_model_ready{", labels, "}")), 1);
    // Gauges refreshed at scrape time exist once per version (they overwrote each other before).
    EXPECT_EQ(Sample(m, absl::StrCat("tide_queue_tasks{", labels, "}")), 0);
    EXPECT_GE(Sample(m, absl::StrCat("tide_padding_ratio{", labels, "}")), 1.0);
    // Batches: each request's 2 rows ran on this version only.
    const double rows = Sample(m, absl::StrCat("tide_batch_size_sum{", labels, "}"));
    EXPECT_EQ(rows, 2 * n);
    EXPECT_GT(Sample(m, absl::StrCat("tide_batch_real_tokens_total{", labels, "}")), 0);
    EXPECT_GE(Sample(m, absl::StrCat(R"(tide_dropped_tasks_total{)", labels, R"(,reason="cancelled"})")), 0);

    // Triton statistics of this version count only its own requests.
    auto stats = client->Get(absl::StrCat("/v2/models/two/versions/", version, "/stats"));
    ASSERT_EQ(stats.status, 200) << stats.body;
    const json s = ParseJson(stats.body);
    ASSERT_TRUE(s.contains("model_stats") && !s["model_stats"].empty()) << stats.body;
    EXPECT_EQ(s["model_stats"][0].value("version", ""), version);
    EXPECT_EQ(s["model_stats"][0]["inference_stats"]["success"].value("count", -1), n) << stats.body;
  }
  EXPECT_EQ(infer_sum, kVersion1Requests + kVersion2Requests);
}

}  // namespace
}  // namespace tide::blackbox
