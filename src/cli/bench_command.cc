#include "cli/bench_command.h"

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <random>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "loadgen/http_transport.h"
#ifdef TIDE_HAVE_GRPC
#include "loadgen/grpc_transport.h"
#endif
#include "loadgen/load_driver.h"
#include "loadgen/report.h"
#include "loadgen/request_builder.h"
#include "loadgen/server_metrics.h"
#include "loadgen/workload.h"
#include "tls/tls_context.h"
#include "tokenizer/tokenizer.h"

namespace tide::cli {
namespace {

using namespace tide::loadgen;

// A whole-string strtod: false when anything but a number is there.
bool ToDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(*out);
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (!f) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<double>> ParseSweep(std::string_view text_view) {
  const std::string text(text_view);
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("sweep '", text, "': expected N, A:B:xF, A:B:+S or a,b,c"));
  };
  std::vector<double> out;
  if (text.find(':') != std::string::npos) {
    std::vector<std::string> parts = absl::StrSplit(text, ':');
    double a = 0, b = 0, step = 0;
    if (parts.size() != 3 || parts[2].size() < 2 || !ToDouble(parts[0], &a) || !ToDouble(parts[1], &b) ||
        !ToDouble(parts[2].substr(1), &step) || a <= 0 || b < a)
      return bad();
    if (parts[2][0] == 'x') {
      if (step <= 1) return bad();
      for (double v = a; v <= b * (1 + 1e-9); v *= step) out.push_back(v);
    } else if (parts[2][0] == '+') {
      if (step <= 0) return bad();
      for (double v = a; v <= b * (1 + 1e-9); v += step) out.push_back(v);
    } else {
      return bad();
    }
    if (out.size() > 1000) return bad();
    return out;
  }
  for (const std::string& item : std::vector<std::string>(absl::StrSplit(text, ','))) {
    double v = 0;
    if (!ToDouble(item, &v) || v <= 0) return bad();
    out.push_back(v);
  }
  return out;
}

absl::StatusOr<int64_t> ParseDurationNs(std::string_view text_view) {
  std::string text(text_view);
  double scale = 1e9;
  if (text.size() > 2 && text.ends_with("ms")) {
    scale = 1e6;
    text.resize(text.size() - 2);
  } else if (text.size() > 1 && text.ends_with("s")) {
    text.resize(text.size() - 1);
  } else if (text.size() > 1 && text.ends_with("m")) {
    scale = 60e9;
    text.resize(text.size() - 1);
  }
  double v = 0;
  if (!ToDouble(text, &v) || v < 0)
    return absl::InvalidArgumentError(absl::StrCat("duration '", std::string(text_view),
                                                   "': expected e.g. 5s, 500ms, 2m"));
  return static_cast<int64_t>(std::llround(v * scale));
}

absl::StatusOr<double> ParseFraction(std::string_view text_view) {
  std::string text(text_view);
  double scale = 1;
  if (text.ends_with("%")) {
    scale = 0.01;
    text.pop_back();
  }
  double v = 0;
  if (!ToDouble(text, &v) || v <= 0)
    return absl::InvalidArgumentError(absl::StrCat("'", std::string(text_view), "': expected e.g. 10% or 0.1"));
  return v * scale;
}

absl::StatusOr<std::vector<size_t>> RequestOrder(std::string_view spec, size_t pool, size_t draws, uint64_t seed) {
  std::vector<size_t> order;
  if (spec == "round-robin") {
    for (size_t i = 0; i < pool; ++i) order.push_back(i);
    return order;
  }
  double s = 0;
  if (spec.substr(0, 5) != "zipf:" || !absl::SimpleAtod(std::string(spec.substr(5)), &s) || !(s > 0) || s > 10) {
    return absl::InvalidArgumentError(
        absl::StrCat("--request-popularity must be round-robin or zipf:S with 0 < S <= 10, got '", std::string(spec), "'"));
  }
  std::vector<double> weights(pool);
  for (size_t k = 0; k < pool; ++k) weights[k] = 1.0 / std::pow(static_cast<double>(k + 1), s);
  std::discrete_distribution<size_t> popularity(weights.begin(), weights.end());
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < draws; ++i) order.push_back(popularity(rng));
  return order;
}

int RunBenchCommand(const BenchCommandOptions& flags, std::ostream& out, std::ostream& err) {
  auto fail = [&](const absl::Status& s, int code) {
    err << "tide bench: " << s.message() << "\n";
    return code;
  };
  // ---- flags ----
  if (flags.protocol != "http" && flags.protocol != "grpc")
    return fail(absl::InvalidArgumentError(absl::StrCat("--protocol must be http or grpc, got '", flags.protocol, "'")),
                2);
  const bool grpc = flags.protocol == "grpc";
#ifndef TIDE_HAVE_GRPC
  if (grpc) return fail(absl::UnimplementedError("this tide was built without gRPC C++: no --protocol grpc"), 2);
#endif
  // gRPC: grpc://host[:port] (port 8001 unless given), read with the HTTP URL parser.
  // gRPC over TLS: grpcs://host[:port].
  std::string url_text = flags.url.empty() ? (grpc ? "grpc://127.0.0.1:8001" : "http://127.0.0.1:8000") : flags.url;
  bool grpc_tls = false;
  if (grpc) {
    grpc_tls = url_text.starts_with("grpcs://");
    if (!url_text.starts_with("grpc://") && !grpc_tls)
      return fail(absl::InvalidArgumentError(absl::StrCat(
                      "with --protocol grpc, --url is grpc://host[:port] or grpcs://host[:port], got '", url_text, "'")),
                  2);
    url_text = "http://" + url_text.substr(grpc_tls ? 8 : 7);
  }
  auto url = ParseHttpUrl(url_text);
  if (!url.ok()) return fail(url.status(), 2);
  if (grpc) {
    if (!url->path.empty())
      return fail(absl::InvalidArgumentError("a gRPC --url has no path (the endpoint names the RPC)"), 2);
    if (url_text.find(':', 7) == std::string::npos) url->port = 8001;
    url->tls = grpc_tls;
  }
  // TLS clients: the HTTP context (also for the /metrics scrape), or the PEM texts gRPC takes.
  const bool tls_flags = !flags.tls_ca_file.empty() || !flags.tls_cert_file.empty() || !flags.tls_key_file.empty();
  if (tls_flags && !url->tls)
    return fail(absl::InvalidArgumentError("--tls-ca-file / --tls-cert-file / --tls-key-file need an https:// or "
                                           "grpcs:// --url"),
                2);
  std::shared_ptr<boost::asio::ssl::context> http_tls;
  if (url->tls && !grpc) {
    auto context = tls::MakeClientContext({flags.tls_ca_file, flags.tls_cert_file, flags.tls_key_file, true});
    if (!context.ok()) return fail(context.status(), 2);
    http_tls = *std::move(context);
  }
  std::string grpc_root_pem, grpc_cert_pem, grpc_key_pem;
  if (url->tls && grpc) {
    if (flags.tls_cert_file.empty() != flags.tls_key_file.empty())
      return fail(absl::InvalidArgumentError("--tls-cert-file and --tls-key-file go together"), 2);
    const std::pair<const std::string*, std::string*> pems[] = {
        {&flags.tls_ca_file, &grpc_root_pem}, {&flags.tls_cert_file, &grpc_cert_pem}, {&flags.tls_key_file, &grpc_key_pem}};
    for (const auto& [path, text] : pems) {
      if (path->empty()) continue;
      std::ifstream in(*path, std::ios::binary);
      if (!in) return fail(absl::InvalidArgumentError(absl::StrCat("cannot read ", *path)), 2);
      *text = std::string(std::istreambuf_iterator<char>(in), {});
    }
  }
  if (flags.connection_close && grpc)
    return fail(absl::InvalidArgumentError("--connection-close is for HTTP (a gRPC channel is one connection)"), 2);
  auto endpoint = ParseEndpoint(flags.endpoint);
  if (!endpoint.ok()) return fail(endpoint.status(), 2);
  if (grpc && *endpoint != Endpoint::kRerank && *endpoint != Endpoint::kKServe)
    return fail(absl::InvalidArgumentError(absl::StrCat("--protocol grpc sends the rerank (tei.v1 Rerank) or kserve "
                                                        "(ModelInfer) endpoint, not '", flags.endpoint, "'")),
                2);
  if (grpc && !flags.body_template.empty())
    return fail(absl::InvalidArgumentError("--body-template is for HTTP bodies, not --protocol grpc"), 2);
  if (grpc && !flags.dump_requests.empty())
    return fail(absl::InvalidArgumentError("--dump-requests writes HTTP bodies, not --protocol grpc messages"), 2);
  auto arrivals = ParseArrivals(flags.arrivals);
  if (!arrivals.ok()) return fail(arrivals.status(), 2);
  auto query_tokens = TokenDistribution::Parse(flags.query_tokens, TextKind::kQuery);
  if (!query_tokens.ok()) return fail(query_tokens.status(), 2);
  auto doc_tokens = TokenDistribution::Parse(flags.doc_tokens, TextKind::kDocument);
  if (!doc_tokens.ok()) return fail(doc_tokens.status(), 2);
  const bool open_loop = !flags.request_rate.empty();
  auto sweep = ParseSweep(open_loop ? flags.request_rate : flags.concurrency);
  if (!sweep.ok()) return fail(sweep.status(), 2);
  auto warmup = ParseDurationNs(flags.warmup);
  if (!warmup.ok()) return fail(warmup.status(), 2);
  auto window = ParseDurationNs(flags.window);
  if (!window.ok()) return fail(window.status(), 2);
  auto stability = ParseFraction(flags.stability);
  if (!stability.ok()) return fail(stability.status(), 2);
  int64_t duration_ns = 0;
  if (!flags.duration.empty()) {
    auto d = ParseDurationNs(flags.duration);
    if (!d.ok()) return fail(d.status(), 2);
    if (*d <= 0) return fail(absl::InvalidArgumentError("--duration must be positive"), 2);
    duration_ns = *d;
  }
  if (flags.request_pool == 0) return fail(absl::InvalidArgumentError("--request-pool must be >= 1"), 2);
  if (flags.timeout_ms <= 0) return fail(absl::InvalidArgumentError("--timeout-ms must be positive"), 2);

  RequestBuilderOptions rb;
  rb.endpoint = *endpoint;
  rb.model = flags.model;
  rb.path = url->path;
  if (!flags.body_template.empty()) {
    std::ifstream f(flags.body_template, std::ios::binary);
    if (!f) return fail(absl::NotFoundError(absl::StrCat("cannot read --body-template ", flags.body_template)), 2);
    std::stringstream ss;
    ss << f.rdbuf();
    rb.body_template = ss.str();
  }
  auto builder = RequestBuilder::Create(rb);
  if (!builder.ok()) return fail(builder.status(), 2);

  // ---- workload ----
  Vocabulary vocabulary;
  if (!flags.tokenizer.empty()) {
    auto tok = tokenizer::Tokenizer::FromFile(flags.tokenizer);
    if (!tok.ok()) return fail(tok.status(), 2);
    auto v = Vocabulary::FromTokenizer(**tok);
    if (!v.ok()) return fail(v.status(), 2);
    vocabulary = *std::move(v);
  } else {
    vocabulary = Vocabulary::BuiltIn();
    err << "tide bench: no --tokenizer given; words come from a built-in list, so token counts are "
           "approximate\n";
  }
  WorkloadOptions wo;
  wo.documents = flags.documents;
  wo.query_tokens = *query_tokens;
  wo.document_tokens = *doc_tokens;
  wo.max_document_tokens = flags.max_doc_tokens;
  wo.seed = flags.seed;
  auto generator = WorkloadGenerator::Create(wo, vocabulary);
  if (!generator.ok()) return fail(generator.status(), 2);

  BenchReport report;
  report.protocol = flags.protocol;
  report.url = flags.url.empty() ? (grpc ? "grpc://127.0.0.1:8001" : "http://127.0.0.1:8000") : flags.url;
  report.endpoint = std::string(EndpointName(*endpoint));
  report.path = (*builder)->path();
#ifdef TIDE_HAVE_GRPC
  if (grpc) report.path = std::string(GrpcMethodFor(*endpoint));
#endif
  report.documents_per_request = flags.documents;
  report.unit = IsEmbedding(*endpoint) ? "texts" : "pairs";
  report.query_tokens = query_tokens->spec();
  report.document_tokens = doc_tokens->spec();
  report.max_document_tokens = flags.max_doc_tokens;
  report.vocabulary = vocabulary.source;
  report.seed = flags.seed;
  std::vector<std::string> bodies;
  std::vector<RerankWorkload> workloads;  // gRPC: the transport builds its messages from these
  bodies.reserve(flags.request_pool);
  double query_sum = 0, doc_sum = 0, docs = 0;
  for (size_t i = 0; i < flags.request_pool; ++i) {
    RerankWorkload w = (*generator)->Next();
    query_sum += w.query_tokens;
    for (int t : w.document_tokens) doc_sum += t;
    docs += static_cast<double>(w.document_tokens.size());
    if (grpc) {
      workloads.push_back(std::move(w));
    } else {
      bodies.push_back((*builder)->Body(w));
    }
  }
  report.mean_query_tokens = query_sum / static_cast<double>(flags.request_pool);
  auto order = RequestOrder(flags.request_popularity, flags.request_pool, 1024, flags.seed);
  if (!order.ok()) return fail(order.status(), 2);
  report.mean_document_tokens = docs > 0 ? doc_sum / docs : 0;
  if (!flags.dump_requests.empty()) {
    std::string lines;
    for (const std::string& body : bodies) {
      if (body.find('\n') != std::string::npos)  // a multi-line body template
        return fail(absl::InvalidArgumentError("--dump-requests writes one body per line, but a body spans lines"), 2);
      absl::StrAppend(&lines, body, "\n");
    }
    if (absl::Status s = WriteFile(flags.dump_requests, lines); !s.ok()) return fail(s, 1);
    err << "tide bench: wrote " << bodies.size() << " request bodies for " << report.path << " to "
        << flags.dump_requests << " (mean tokens query " << absl::StrFormat("%.1f", report.mean_query_tokens)
        << ", document " << absl::StrFormat("%.1f", report.mean_document_tokens) << ")\n";
    return 0;
  }

  // ---- runs ----
  bool metrics_warned = false;
  auto scrape = [&]() -> std::optional<StageTotals> {
    if (!flags.scrape_metrics || grpc) return std::nullopt;  // gRPC: the answers' trailers instead
    auto text = HttpGet(url->host, url->port, "/metrics", std::chrono::milliseconds(5000), http_tls);
    if (!text.ok()) {
      if (!metrics_warned) err << "tide bench: no server-side split: " << text.status().message() << "\n";
      metrics_warned = true;
      return std::nullopt;
    }
    return ParseStageTotals(*text);
  };
  for (double point : *sweep) {
    RunReport run;
    run.open_loop = open_loop;
    LoadOptions lo;
    if (open_loop) {
      run.request_rate = point;
      run.arrivals = std::string(ArrivalsName(*arrivals));
      lo.request_rate = point;
      lo.arrivals = *arrivals;
    } else {
      run.concurrency = static_cast<int>(std::lround(point));
      lo.concurrency = run.concurrency;
    }
    lo.seed = flags.seed;
    lo.warmup_ns = *warmup;
    lo.window_ns = *window;
    lo.stability = *stability;
    lo.max_windows = flags.max_windows;
    lo.duration_ns = duration_ns;
    lo.drain_ns = flags.timeout_ms * 1'000'000;  // no request outlives its timeout

    const size_t max_connections = open_loop ? flags.max_connections : static_cast<size_t>(run.concurrency);
    std::optional<StageTotals> before = scrape();
    std::optional<StageTotals> trailer_stages;  // gRPC
    const double cpu0 = CpuSeconds();
    const auto wall0 = std::chrono::steady_clock::now();
    absl::StatusOr<LoadResult> result;
    if (!grpc) {
      HttpTransportOptions to;
      to.host = url->host;
      to.port = url->port;
      to.path = (*builder)->path();
      for (size_t i : *order) to.bodies.push_back(bodies[i]);
      to.max_connections = max_connections;
      to.timeout_ms = flags.timeout_ms;
      to.tls = http_tls;
      to.connection_close = flags.connection_close;
      AsioEventLoop loop;
      auto transport = HttpTransport::Create(&loop, to);
      if (!transport.ok()) return fail(transport.status(), 1);
      result = RunLoad(&loop, transport->get(), lo);
      transport->reset();  // before the loop (see http_transport.h)
    }
#ifdef TIDE_HAVE_GRPC
    if (grpc) {
      GrpcTransportOptions to;
      to.host = url->host;
      to.port = url->port;
      to.endpoint = *endpoint;
      to.model = flags.model;
      for (size_t i : *order) to.workloads.push_back(workloads[i]);
      to.max_in_flight = max_connections;
      to.timeout_ms = flags.timeout_ms;
      to.tls = url->tls;
      to.tls_root_pem = grpc_root_pem;
      to.tls_cert_pem = grpc_cert_pem;
      to.tls_key_pem = grpc_key_pem;
      AsioEventLoop loop;
      auto transport = GrpcTransport::Create(&loop, to);
      if (!transport.ok()) return fail(transport.status(), 1);
      result = RunLoad(&loop, transport->get(), lo);
      trailer_stages = (*transport)->stage_totals();
      transport->reset();  // before the loop (see grpc_transport.h)
    }
#endif
    run.client_cpu_seconds = CpuSeconds() - cpu0;
    run.client_wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    if (!result.ok()) return fail(result.status(), 1);
    run.load = *std::move(result);
    std::optional<StageTotals> after = before ? scrape() : std::nullopt;
    if (before && after) {
      run.server_metrics = true;
      run.server_stages = DiffStageTotals(*before, *after);
    }
    if (trailer_stages) {
      run.server_metrics = true;
      run.server_stages_source = "trailers";
      run.server_stages = DiffStageTotals({}, *trailer_stages);
    }
    FinalizeRun(flags.documents, &run);
    err << "tide bench: " << run.label() << ": " << absl::StrFormat("%.2f", run.qps) << " req/s, p99 "
        << absl::StrFormat("%.2f", run.latency.p99_ms) << " ms, " << run.load.windows.size() << " window(s)"
        << (run.load.stable || duration_ns > 0 ? "" : " (not stable)") << "\n";
    report.runs.push_back(std::move(run));
  }

  // ---- reports ----
  out << "tide bench: " << report.url << " " << report.endpoint << " (" << report.path << "), ";
  if (IsEmbedding(*endpoint)) {
    out << report.documents_per_request << " texts/request, mean tokens per text "
        << absl::StrFormat("%.1f", report.mean_document_tokens);
  } else {
    out << report.documents_per_request << " documents/request, mean tokens query "
        << absl::StrFormat("%.1f", report.mean_query_tokens) << " document "
        << absl::StrFormat("%.1f", report.mean_document_tokens);
  }
  out << " (" << report.vocabulary << ")\n";
  out << RenderTable(report);
  out.flush();
  int code = 0;
  const std::pair<const std::string*, std::string (*)(const BenchReport&)> files[] = {
      {&flags.csv, &RenderCsv}, {&flags.json, &RenderJson}, {&flags.html, &RenderHtml}};
  for (const auto& [path, render] : files) {
    if (path->empty()) continue;
    if (absl::Status s = WriteFile(*path, render(report)); !s.ok()) code = fail(s, 1);
  }
  return code;
}

void RegisterBenchCommand(CLI::App* app) {
  auto flags = std::make_shared<BenchCommandOptions>();
  CLI::App* cmd = app->add_subcommand(
      "bench", "Load generator for tide's rerank / KServe / embedding endpoints (closed-loop sweeps, open-loop rates)");
  auto opt = [&](const char* name, auto& field, const char* env, const char* help) {
    cmd->add_option(name, field, help)->envname(env)->capture_default_str();
  };
  opt("--protocol", flags->protocol, "TIDE_BENCH_PROTOCOL",
      "http | grpc (rerank: tei.v1 Rerank, kserve: ModelInfer with BYTES text/text_pair)");
  opt("--url", flags->url, "TIDE_BENCH_URL",
      "Server URL (default http://127.0.0.1:8000; grpc://127.0.0.1:8001 with --protocol grpc); an HTTP path "
      "overrides the endpoint's");
  opt("--endpoint", flags->endpoint, "TIDE_BENCH_ENDPOINT",
      "rerank | v1-rerank | kserve | embed | v1-embeddings | template (embed, v1-embeddings: each request embeds "
      "--documents texts of --doc-tokens)");
  opt("--model", flags->model, "TIDE_BENCH_MODEL", "Model name (KServe path, Cohere and OpenAI \"model\")");
  opt("--body-template", flags->body_template, "TIDE_BENCH_BODY_TEMPLATE",
      "Body template file: {{query}} {{query_json}} {{documents_json}} {{model}} {{n_documents}}");
  opt("--tokenizer", flags->tokenizer, "TIDE_BENCH_TOKENIZER",
      "tokenizer.json of the served model (words from its vocabulary: N words = N tokens)");
  opt("--documents", flags->documents, "TIDE_BENCH_DOCUMENTS", "Documents per request (texts per embedding request)");
  opt("--query-tokens", flags->query_tokens, "TIDE_BENCH_QUERY_TOKENS",
      "scifact | N | uniform:A:B | quantiles:q=t,...");
  opt("--doc-tokens", flags->doc_tokens, "TIDE_BENCH_DOC_TOKENS", "scifact | N | uniform:A:B | quantiles:q=t,...");
  opt("--max-doc-tokens", flags->max_doc_tokens, "TIDE_BENCH_MAX_DOC_TOKENS", "Cap per document (0 = none)");
  opt("--concurrency", flags->concurrency, "TIDE_BENCH_CONCURRENCY", "Closed-loop sweep: N | A:B:xF | A:B:+S | a,b");
  opt("--request-rate", flags->request_rate, "TIDE_BENCH_REQUEST_RATE",
      "Open loop: requests/s (R | A:B:xF | a,b); latency from the intended send time");
  opt("--arrivals", flags->arrivals, "TIDE_BENCH_ARRIVALS", "constant | poisson (open loop)");
  opt("--max-connections", flags->max_connections, "TIDE_BENCH_MAX_CONNECTIONS", "Open-loop connection pool");
  opt("--warmup", flags->warmup, "TIDE_BENCH_WARMUP", "Warm-up before measuring (excluded)");
  opt("--window", flags->window, "TIDE_BENCH_WINDOW", "Measurement window");
  opt("--stability", flags->stability, "TIDE_BENCH_STABILITY",
      "3 consecutive windows within this of their mean (throughput and p99)");
  opt("--max-windows", flags->max_windows, "TIDE_BENCH_MAX_WINDOWS", "Give up on stability after this many");
  opt("--duration", flags->duration, "TIDE_BENCH_DURATION", "Fixed-duration window instead of stability");
  opt("--seed", flags->seed, "TIDE_BENCH_SEED", "Workload and arrival seed");
  opt("--request-pool", flags->request_pool, "TIDE_BENCH_REQUEST_POOL", "Distinct requests, sent round-robin");
  opt("--request-popularity", flags->request_popularity, "TIDE_BENCH_REQUEST_POPULARITY",
      "round-robin | zipf:S (pool entry of rank k sent with probability ~ 1/k^S)");
  opt("--csv", flags->csv, "TIDE_BENCH_CSV", "Write a CSV report");
  opt("--json", flags->json, "TIDE_BENCH_JSON", "Write a JSON report");
  opt("--html", flags->html, "TIDE_BENCH_HTML", "Write a self-contained HTML report");
  opt("--dump-requests", flags->dump_requests, "TIDE_BENCH_DUMP_REQUESTS",
      "Write the request pool's bodies (one per line) to this file and exit without sending");
  opt("--timeout-ms", flags->timeout_ms, "TIDE_BENCH_TIMEOUT_MS", "Per-request timeout");
  opt("--tls-ca-file", flags->tls_ca_file, "TIDE_BENCH_TLS_CA_FILE",
      "https:// and grpcs:// URLs: PEM CA bundle to verify the server with (default: the system's)");
  opt("--tls-cert-file", flags->tls_cert_file, "TIDE_BENCH_TLS_CERT_FILE",
      "Client certificate (PEM) for servers that require one (mutual TLS); needs --tls-key-file");
  opt("--tls-key-file", flags->tls_key_file, "TIDE_BENCH_TLS_KEY_FILE", "Private key of --tls-cert-file (PEM)");
  cmd->add_flag("--connection-close", flags->connection_close,
                "HTTP: a new connection (and TLS handshake) for every request instead of keep-alive")
      ->envname("TIDE_BENCH_CONNECTION_CLOSE");
  cmd->add_flag("--scrape-metrics,!--no-scrape-metrics", flags->scrape_metrics,
                "GET /metrics before and after each run for the server-side split")
      ->envname("TIDE_BENCH_SCRAPE_METRICS");
  cmd->callback([flags] {
    const int code = RunBenchCommand(*flags, std::cout, std::cerr);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace tide::cli
