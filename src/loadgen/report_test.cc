#include "loadgen/report.h"

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tide::loadgen {
namespace {

BenchReport SampleReport() {
  BenchReport report;
  report.url = "http://127.0.0.1:8000";
  report.endpoint = "rerank";
  report.path = "/rerank";
  report.documents_per_request = 4;
  report.query_tokens = "scifact";
  report.document_tokens = "scifact";
  report.max_document_tokens = 512;
  report.vocabulary = "built-in <words>";
  report.seed = 42;
  for (int c : {1, 2}) {
    RunReport run;
    run.concurrency = c;
    for (int i = 1; i <= 100; ++i) run.load.latency.Record(i * c);
    run.load.completed = 100;
    run.load.measured_seconds = 10;
    run.load.stable = true;
    run.load.windows.push_back({100, 0, 10, 99.0 * c});
    if (c == 2) {
      run.load.errors["http 503"] = 3;
      for (double ms : {0.25, 0.5, 4.0}) run.load.shed_latency.Record(ms);
    }
    run.client_cpu_seconds = 0.5;
    run.client_wall_seconds = 10;
    run.server_metrics = true;
    run.server_stages = {{"tokenize", 100, 1.25}, {"inference", 100, 20}};
    FinalizeRun(report.documents_per_request, &run);
    report.runs.push_back(run);
  }
  return report;
}

TEST(Report, FinalizeComputesRatesAndCpu) {
  BenchReport r = SampleReport();
  EXPECT_DOUBLE_EQ(r.runs[0].qps, 10);
  EXPECT_DOUBLE_EQ(r.runs[0].pairs_per_s, 40);
  EXPECT_DOUBLE_EQ(r.runs[0].client_cpu_percent, 5);
  EXPECT_EQ(r.runs[1].latency.p99_ms, 198);
}

TEST(Report, CsvHasTheDocumentedColumnsAndOneRowPerRun) {
  std::string csv = RenderCsv(SampleReport());
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "mode,concurrency,request_rate,qps,pairs_per_s,completed,errors,stable,p50_ms,p90_ms,p95_ms,"
            "p99_ms,p999_ms,max_ms,mean_ms,client_cpu_percent,server_tokenize_ms,server_queue_ms,"
            "server_inference_ms,server_postprocess_ms,shed_count,shed_p50_ms,shed_p99_ms,shed_max_ms");
  for (size_t i = 1; i < lines.size(); ++i)
    EXPECT_EQ(std::vector<std::string>(absl::StrSplit(lines[i], ',')).size(), 24u) << lines[i];
  EXPECT_EQ(lines[1].substr(lines[1].size() - 5), ",0,,,");  // no shed answers: empty latencies
  EXPECT_EQ(lines[2],
            "closed,2,0,10.000,40.000,100,3,1,100.000,180.000,190.000,198.000,200.000,200.000,101.000,5.0,"
            "1.250,,20.000,,3,0.500,4.000,4.000");
}

TEST(Report, JsonCarriesEveryRunWithLatenciesErrorsAndServerStages) {
  nlohmann::json j = nlohmann::json::parse(RenderJson(SampleReport()));
  EXPECT_EQ(j["tool"], "tide bench");
  EXPECT_EQ(j["workload"]["documents_per_request"], 4);
  ASSERT_EQ(j["runs"].size(), 2u);
  const auto& run = j["runs"][1];
  EXPECT_EQ(run["mode"], "closed");
  EXPECT_EQ(run["concurrency"], 2);
  EXPECT_DOUBLE_EQ(run["qps"].get<double>(), 10);
  EXPECT_EQ(run["errors"]["http 503"], 3);
  EXPECT_EQ(run["error_count"], 3);
  EXPECT_DOUBLE_EQ(run["latency_ms"]["p50"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(run["latency_ms"]["p99.9"].get<double>(), 200);
  EXPECT_DOUBLE_EQ(run["server_stages_ms"]["tokenize"]["mean_ms"].get<double>(), 1.25);
  EXPECT_DOUBLE_EQ(run["client_cpu"]["percent_of_one_core"].get<double>(), 5);
  EXPECT_EQ(run["windows"].size(), 1u);
  EXPECT_EQ(run["shed_latency_ms"]["count"], 3);
  EXPECT_DOUBLE_EQ(run["shed_latency_ms"]["max"].get<double>(), 4.0);
  EXPECT_EQ(j["runs"][0]["shed_latency_ms"]["count"], 0);
}

TEST(Report, HtmlIsSelfContainedWithSvgCharts) {
  std::string html = RenderHtml(SampleReport());
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("<polyline"), std::string::npos);  // latency vs throughput
  EXPECT_NE(html.find("<rect x="), std::string::npos);    // histogram bars
  EXPECT_NE(html.find("latency (ms, log scale)"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("<words>"), std::string::npos);  // escaped
  EXPECT_NE(html.find("&lt;words&gt;"), std::string::npos);
}

TEST(Report, TableShowsEveryRunAndTheServerSplit) {
  std::string table = RenderTable(SampleReport());
  EXPECT_NE(table.find("c=1"), std::string::npos);
  EXPECT_NE(table.find("c=2"), std::string::npos);
  EXPECT_NE(table.find("http 503:3"), std::string::npos);
  EXPECT_NE(table.find("tokenize 1.25 ms"), std::string::npos);
  EXPECT_NE(table.find("shed answers (429/503): 3, p50 0.500 ms, p90 4.000 ms, p99 4.000 ms"), std::string::npos) << table;
  EXPECT_EQ(table.find("shed answers (429/503): 0"), std::string::npos);  // only runs that had some
  EXPECT_NE(table.find("pairs/s"), std::string::npos);
}

// An embedding run counts texts: the table's column and the JSON say so.
TEST(Report, EmbeddingRunsCountTexts) {
  BenchReport report = SampleReport();
  report.unit = "texts";
  const std::string table = RenderTable(report);
  EXPECT_NE(table.find("texts/s"), std::string::npos) << table;
  EXPECT_EQ(table.find("pairs/s"), std::string::npos) << table;
  EXPECT_EQ(nlohmann::json::parse(RenderJson(report))["workload"]["unit"], "texts");
  EXPECT_NE(RenderHtml(report).find("<th>texts/s</th>"), std::string::npos);
}

}  // namespace
}  // namespace tide::loadgen
