// tide::loadgen reports — the results of a `tide bench` sweep as a console table, CSV, JSON and a
// self-contained HTML page (inline SVG charts, no scripts, no external resources).
//
// Contract: pure functions of a BenchReport, thread-safe, never throw. Column/field names:
//   CSV columns (one row per run point): mode, concurrency, request_rate, qps, pairs_per_s,
//     completed, errors, stable, p50_ms, p90_ms, p95_ms, p99_ms, p999_ms, max_ms, mean_ms,
//     client_cpu_percent, server_tokenize_ms, server_queue_ms, server_inference_ms,
//     server_postprocess_ms (server_* empty when /metrics could not be scraped), shed_count,
//     shed_p50_ms, shed_p99_ms, shed_max_ms (latency of 429/503 answers; empty when there were none)
//   JSON: {"tool", "url", "endpoint", "path", "workload": {...}, "runs": [{"mode",
//     "concurrency", "request_rate", "qps", "pairs_per_s", "completed", "errors": {kind: n},
//     "error_count", "stable", "measured_seconds", "windows": [...], "latency_ms": {"p50", ...},
//     "shed_latency_ms": {"count", "p50", "p90", ...}, "client_cpu": {...}, "server_stages_ms": {...},
//     "outstanding_at_end"}]}
//   Console table: a "shed answers" line under a run that got 429/503 (gRPC: RESOURCE_EXHAUSTED /
//   UNAVAILABLE) answers, with their latency (from the intended send time, like the successes'):
//   how fast overload is answered. JSON also has "protocol" (top level) and, per run,
//   "server_stages_source" ("metrics" | "trailers").
//   shed_* CSV columns and shed_latency_ms count gRPC's RESOURCE_EXHAUSTED / UNAVAILABLE alike.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "loadgen/latency_recorder.h"
#include "loadgen/load_driver.h"
#include "loadgen/server_metrics.h"

namespace tide::loadgen {

struct RunReport {
  bool open_loop = false;
  int concurrency = 0;      // closed loop
  double request_rate = 0;  // open loop, requests/s
  std::string arrivals;     // open loop: "constant" | "poisson"
  LoadResult load;
  LatencySummary latency;   // of load.latency
  LatencySummary shed_latency;  // of load.shed_latency (429 / 503 answers)
  double qps = 0;
  double pairs_per_s = 0;
  double client_cpu_seconds = 0;  // user + system, getrusage(RUSAGE_SELF) over the whole run
  double client_wall_seconds = 0;
  double client_cpu_percent = 0;  // of one core
  bool server_metrics = false;    // a server-side split is known (server_stages)
  // Where it came from: "metrics" (/metrics scraped before and after the run, HTTP) or
  // "trailers" (the server-timing trailers of the run's OK answers, gRPC).
  std::string server_stages_source = "metrics";
  std::vector<StageSplit> server_stages;
  std::string label() const;      // "c=4" or "rate=50/s"
};

struct BenchReport {
  std::string protocol = "http";  // "http" | "grpc"
  std::string url;
  std::string endpoint;
  std::string path;
  size_t documents_per_request = 0;
  // What one request's items are: "pairs" (query, document) for reranks, "texts" for the
  // embedding endpoints; the table's throughput column and the JSON's "unit" say it, and
  // pairs_per_s then counts texts.
  std::string unit = "pairs";
  std::string query_tokens;     // distribution spec
  std::string document_tokens;  // distribution spec
  int max_document_tokens = 0;
  std::string vocabulary;       // where the words came from
  uint64_t seed = 0;
  double mean_query_tokens = 0;     // over the generated request pool
  double mean_document_tokens = 0;  // over the generated request pool
  std::vector<RunReport> runs;
};

// Fills latency, qps and pairs_per_s from run->load.
void FinalizeRun(size_t documents_per_request, RunReport* run);

std::string RenderTable(const BenchReport& report);
std::string RenderCsv(const BenchReport& report);
std::string RenderJson(const BenchReport& report);
std::string RenderHtml(const BenchReport& report);

}  // namespace tide::loadgen
