// `tide bench`: a load generator for tide's rerank and KServe v2 endpoints (and any HTTP endpoint
// from a body template), perf_analyzer style.
//
//   tide bench --url http://127.0.0.1:8000 --endpoint rerank --tokenizer tokenizer.json
//              --documents 16 --concurrency 1:64:x2 [--html report.html --json out.json --csv out.csv]
//   tide bench --request-rate 20,40,80 --arrivals poisson ...        (open loop)
//   tide bench --protocol grpc --url grpc://127.0.0.1:8001 --endpoint rerank|kserve --model m ...
// gRPC (--protocol grpc): the rerank endpoint calls tei.v1 Rerank, kserve calls ModelInfer with
// BYTES text / text_pair in raw_input_contents; one channel, at most `concurrency` (open loop:
// --max-connections) calls in flight; the server-side split comes from each OK answer's
// server-timing trailer instead of /metrics; errors are counted as "grpc <CODE>", and
// RESOURCE_EXHAUSTED / UNAVAILABLE count as shed answers. v1-rerank, template, --body-template
// and --dump-requests are HTTP only (exit code 2).
// Closed loop (default): one run per concurrency of the sweep. Open loop (--request-rate): one run
// per rate; latency is measured from each request's intended send time. Each run: warm-up, then
// measurement windows until 3 consecutive ones agree within --stability on throughput and p99
// (at most --max-windows), or one --duration window. Around each run the server's /metrics is
// scraped for the tokenize/queue/inference split, and the client's own CPU use is reported.
// --dump-requests FILE writes the --request-pool bodies that a run would send, one JSON body per
// line, and exits without contacting the server (so other load generators can replay them).
// Every flag has a TIDE_BENCH_* environment twin. Exit codes: 0 all runs done (errors, if any,
// are in the report), 1 a run could not be carried out or a report not written, 2 bad flags or
// an unusable tokenizer/template.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace CLI {
class App;
}

namespace tide::cli {

void RegisterBenchCommand(CLI::App* app);

struct BenchCommandOptions {
  std::string protocol = "http";                // http | grpc
  // "" = http://127.0.0.1:8000, or grpc://127.0.0.1:8001 with protocol grpc. HTTP: the path part,
  // if any, overrides the endpoint's. gRPC: grpc://host[:port] (port 8001 unless given), no path.
  std::string url;
  std::string endpoint = "rerank";              // rerank | v1-rerank | kserve | template
  std::string model;                            // KServe model; Cohere "model" field
  std::string body_template;                    // file with a body template ("" = built-in body)
  std::string tokenizer;                        // tokenizer.json of the served model ("" = word list)
  size_t documents = 16;                        // documents per request
  std::string query_tokens = "scifact";         // distribution spec (see loadgen/token_distribution.h)
  std::string doc_tokens = "scifact";
  int max_doc_tokens = 512;                     // cap per document (0 = none)
  std::string concurrency = "1:64:x2";          // sweep: N | A:B:xF | A:B:+S | a,b,c
  std::string request_rate;                     // open loop when set: R | A:B:xF | a,b,c (req/s)
  std::string arrivals = "constant";            // constant | poisson
  size_t max_connections = 64;                  // open loop: connection pool size
  std::string warmup = "5s";
  std::string window = "5s";
  std::string stability = "10%";
  int max_windows = 10;
  std::string duration;                         // fixed-duration mode when set (e.g. "30s")
  uint64_t seed = 42;
  size_t request_pool = 64;                     // distinct generated requests, sent round-robin
  // How often each request of the pool is sent: "round-robin" (each in turn) or "zipf:S" (request
  // of popularity rank k with probability ~ 1/k^S, as popular queries recur in RAG pipelines;
  // a sequence of 1024 draws, seeded by --seed, is sent round-robin).
  std::string request_popularity = "round-robin";
  std::string csv, json, html;                  // report files ("" = not written)
  int64_t timeout_ms = 30000;                   // per request
  bool scrape_metrics = true;                   // GET /metrics before and after each run
  std::string dump_requests;                    // write the request pool (one body per line) and exit
  // TLS (https:// and grpcs:// URLs): the CA bundle the server is verified against ("": the
  // system's), and a client certificate and key for servers that require one (mutual TLS).
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // HTTP: send `Connection: close`, so that every request opens (and with TLS, handshakes) a new
  // connection: the cost of new connections instead of keep-alive.
  bool connection_close = false;
};

int RunBenchCommand(const BenchCommandOptions& options, std::ostream& out, std::ostream& err);

// Flag parsers, exposed for tests. kInvalidArgument naming the text on error.
// "4" | "1:64:x2" (1,2,4,...,64) | "8:32:+8" (8,16,24,32) | "1,3,9".
absl::StatusOr<std::vector<double>> ParseSweep(std::string_view text);
// "5s", "500ms", "2m", "1.5" (seconds) -> nanoseconds.
absl::StatusOr<int64_t> ParseDurationNs(std::string_view text);
// "10%" or "0.1" -> 0.1.
absl::StatusOr<double> ParseFraction(std::string_view text);
// The order in which pool entries 0..pool-1 are sent for --request-popularity `spec`:
// "round-robin" -> 0, 1, ..., pool-1; "zipf:S" (S > 0) -> `draws` indices drawn with probability
// proportional to 1/(k+1)^S, deterministic for a seed.
absl::StatusOr<std::vector<size_t>> RequestOrder(std::string_view spec, size_t pool, size_t draws, uint64_t seed);

}  // namespace tide::cli
