#include "cli/serve_command.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <cstdlib>

#include "cli/hf_export.h"
#include "config/hf_model_folder.h"
#ifdef TIDE_HAVE_GRPC
#include "server/grpc/grpc_server.h"
#endif
#include "server/http/http_server.h"
#include "server/routes/repository_routes.h"
#include "pipeline/request_pipeline.h"
#include "server/routes/service.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error.h"
#include "common/error_echo.h"
#include "guard/access.h"
#include "guard/api_keys.h"
#include "server/http/browser_checks.h"
#include "serving/model_loader.h"
#include "runtime/ort_backend.h"
#include "serving/model_manager.h"
#include "serving/rollout_hook.h"
#include "serving/service_core.h"
#include "serving/shadow_trace.h"
#include "serving/model_repository_controller.h"
#include "serving/serving_metrics.h"
#include "spdlog/spdlog.h"
#include "tls/tls_context.h"
#include "tracing/batch_span_processor.h"
#include "tracing/otlp_encoding.h"
#include "tracing/otlp_http_exporter.h"
#include "tracing/trace_context.h"
#include "tracing/tracer.h"
#include "tracing/tracing_options.h"
#ifdef TIDE_HAVE_GRPC
#include "tracing/otlp_grpc_exporter.h"
#endif

namespace tide::cli {

namespace {

// tide_errors_without_kind_total while a server runs (SetErrorWithoutKindHook takes a plain function).
std::atomic<metrics::Counter*> errors_without_kind_counter{nullptr};

// An error that reached an edge without an error kind (a library status no boundary converted) is
// answered as internal (500): counted, and logged while rare.
void OnErrorWithoutKind(const absl::Status& status) {
  if (metrics::Counter* counter = errors_without_kind_counter.load(std::memory_order_acquire)) counter->Increment();
  const uint64_t n = ErrorsWithoutKind();
  if (n <= 10 || (n & (n - 1)) == 0) {
    spdlog::error("an error without an error kind reached an edge (answered as internal; {} so far): {}", n,
                  EscapeForLog(status.ToString()));
  }
}

// Clears the hook when the server's metrics go away.
struct ErrorWithoutKindHookScope {
  explicit ErrorWithoutKindHookScope(metrics::Counter* counter) {
    errors_without_kind_counter.store(counter, std::memory_order_release);
    SetErrorWithoutKindHook(&OnErrorWithoutKind);
  }
  ~ErrorWithoutKindHookScope() {
    SetErrorWithoutKindHook(nullptr);
    errors_without_kind_counter.store(nullptr, std::memory_order_release);
  }
  ErrorWithoutKindHookScope(const ErrorWithoutKindHookScope&) = delete;
  ErrorWithoutKindHookScope& operator=(const ErrorWithoutKindHookScope&) = delete;
};

struct ServeFlags {
  std::string model_repository = "models";
  // --model: a HuggingFace model folder served as one model (config::LoadHuggingFaceFolder); the
  // repository is then scanned only when --model-repository (or its env twin) is given as well.
  std::string hf_model;
  std::string onnx_file;
  std::string served_model_name;
  std::string export_dir;
  bool auto_export = true;     // run tools/export_model.py for a folder without ONNX file
  std::string export_script;   // empty: cli::DefaultExportScript()
  std::string task;            // --task rerank: a decoder CausalLM folder served as a reranker
  std::string rerank_tokens;   // --rerank-tokens YES,NO (empty: the export tool's default)
  bool model_repository_given = false;
  // --api-keys: several keys with quotas (guard/api_keys.h); reloaded on SIGHUP.
  std::string api_keys_file;
  // --access-log: one JSON line per answered request (serving/access_log.h); "-": stdout; reopened
  // on SIGHUP. Empty: none.
  std::string access_log;
  std::string log_level = "info";
  // Model control (Triton's names): none | poll | explicit; poll interval; models loaded at start in
  // explicit mode ("*": all); the key of the repository API (empty: --api-key).
  std::string model_control_mode = "none";
  int64_t repository_poll_secs = 15;
  std::vector<std::string> load_models;
  std::string admin_api_key;
  // Secrets from files (never on the command line): the inference key and the admin key, one
  // line each; re-read on SIGHUP with --api-keys.
  std::string api_key_file;
  std::string admin_api_key_file;
  // Browser protections (server/routes/service.h): the Host names served (default: those of a
  // loopback bind address; any elsewhere) and the origins allowed cross-origin (none).
  std::vector<std::string> allowed_hosts;
  bool allowed_hosts_given = false;
  std::vector<std::string> cors_allow_origins;
  // --tls-cert-file, --tls-key-file, --tls-client-ca-file: HTTPS on the HTTP and admin listeners
  // and TLS on the gRPC edge, one certificate for all; reloaded on SIGHUP. None: plaintext.
  tls::ServerTlsFiles tls;
  // The option structs of the parts `tide serve` wires: flags bind to their fields, so each
  // default is stated once, in the struct (durations, which CLI11 cannot bind, are taken from it).
  http::HttpServerOptions http;
  serving::ServiceCoreOptions core;
  server::ServiceOptions service;
  pipeline::PipelineOptions pipeline;  // request limits and version, for both edges
  serving::ServedModelOptions model;
  int64_t header_read_timeout_ms = http::HttpServerOptions{}.header_read_timeout.count();
  int64_t body_read_timeout_ms = http::HttpServerOptions{}.body_read_timeout.count();
  int64_t idle_timeout_ms = http::HttpServerOptions{}.idle_timeout.count();
  int64_t io_time_slice_us = http::HttpServerOptions{}.io_time_slice.count();
  int64_t shutdown_grace_ms = serving::ServedModelOptions{}.shutdown_grace.count();
  // The admin listener for probes and scrapes (0: none).
  int admin_port = 0;
  // The gRPC edge (KServe v2 GRPCInferenceService, tei.v1, grpc.health.v1); port 0: none.
  int grpc_port = 8001;
  // Whether --grpc-port (or TIDE_GRPC_PORT) was given: then a port that cannot be bound is fatal;
  // the default one being taken (another server on this host) only turns gRPC off, with a warning.
  bool grpc_port_given = false;
  int64_t grpc_max_message_bytes = 8 * 1024 * 1024;
#ifdef TIDE_HAVE_GRPC
  // The gRPC edge's connection settings (--grpc-max-connections ... --grpc-http2-max-ping-strikes;
  // defaults in GrpcServerOptions).
  grpc_edge::GrpcServerOptions grpc_options;
  int64_t grpc_handshake_timeout_ms = grpc_edge::GrpcServerOptions{}.handshake_timeout.count();
  int64_t grpc_max_connection_idle_ms = grpc_edge::GrpcServerOptions{}.max_connection_idle.count();
  int64_t grpc_max_connection_age_ms = grpc_edge::GrpcServerOptions{}.max_connection_age.count();
  int64_t grpc_max_connection_age_grace_ms = grpc_edge::GrpcServerOptions{}.max_connection_age_grace.count();
  int64_t grpc_min_recv_ping_interval_ms =
      grpc_edge::GrpcServerOptions{}.http2_min_recv_ping_interval_without_data.count();
#endif
  // `tide serve`'s own policy where it deliberately differs from the libraries' neutral defaults
  // (which tests and embedders get): a deadline, a concurrency cap, and inference threads niced.
  int64_t default_timeout_ms = 30000;
  // Shadow lanes' threads (serving/shadow_lane.h): idle (SCHED_IDLE) | normal.
  std::string shadow_scheduling = "idle";
  // Tenant isolation: --score-cache-scope tenant | shared (serving::ScoreCacheScope).
  std::string score_cache_scope = "tenant";
  int shadow_hold_off_ms = 10;
  // Rollouts started through the API, kept across restarts (serving/rollout_state_file.h); "": none.
  std::string rollout_state_file;
  // Tracing (tracing/tracing_options.h: these over the OTEL_* environment); unset: not given.
  tracing::TracingFlags tracing;
  ServeFlags() {
    core.max_concurrent_requests = 512;
    // Measured (bench/overload/shed_latency.sh, 10x overload): shed-answer p99 5.2 -> 2.1 ms and
    // /v2/health/live p50 1.95 -> 0.36 ms at the same throughput.
    model.inference_nice = 10;
  }
};

// Raises the soft open-file limit to the hard one: connection caps (--max-connections,
// --grpc-max-connections) should decide how many clients are held, not a low default soft limit.
// The gRPC edge lowers its cap to keep --grpc-descriptor-reserve spare under what this leaves.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    spdlog::debug("open-file limit raised from {} to {}", static_cast<uint64_t>(before),
                  static_cast<uint64_t>(limit.rlim_cur));
  }
}

// Watches the shutdown signals while `tide serve` starts (the main thread is busy loading models):
// SIGTERM or SIGINT exits the process at once (status 0; nothing is served yet, so there is
// nothing to drain); SIGHUP is ignored (the keys file is read after the models). Stop() hands the
// signals back to the main thread's sigwait; signals arriving meanwhile stay pending for it.
class StartupSignalWatcher {
 public:
  explicit StartupSignalWatcher(const sigset_t& signals) : signals_(signals), thread_([this] { Run(); }) {}
  ~StartupSignalWatcher() { Stop(); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Run() {
    const timespec slice{0, 50 * 1000 * 1000};
    while (!stop_.load()) {
      siginfo_t info;
      const int signal_number = sigtimedwait(&signals_, &info, &slice);
      if (signal_number == SIGTERM || signal_number == SIGINT) {
        spdlog::info("received {} while starting (models still loading): exiting without serving",
                     signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
        spdlog::default_logger()->flush();
        std::fflush(stdout);
        std::_Exit(0);
      }
      if (signal_number == SIGHUP) spdlog::info("received SIGHUP while starting: ignored");
    }
  }

  sigset_t signals_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The admin listener's own connection cap (probes and scrapers; eviction applies there too).
constexpr size_t kAdminMaxConnections = 64;
// After the grace period's deadline: time for the answers of dropped work (503) to be written.
constexpr std::chrono::milliseconds kShutdownFlushMargin{500};

// The key a --api-key-file / --admin-api-key-file holds: its content without surrounding
// whitespace (a trailing newline is the norm). Empty or unreadable: an error naming the flag.
absl::StatusOr<std::string> ReadKeyFile(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot read ", path));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > 4096) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is over 4 KiB: not a key"));
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " is empty"));
  const size_t end = text.find_last_not_of(" \t\r\n");
  std::string key = text.substr(begin, end - begin + 1);
  if (key.find_first_of(" \t\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " holds more than one word; it must hold just the key"));
  }
  return key;
}

// Every credential the flags name, read now (at start and on SIGHUP): the single keys (the flag's
// value, else its file's) and the --api-keys table.
struct Credentials {
  std::string api_key;
  std::string admin_api_key;
  std::shared_ptr<guard::ApiKeys> api_keys;
};
absl::StatusOr<Credentials> LoadCredentials(const ServeFlags& f) {
  Credentials c;
  c.api_key = f.core.api_key;
  c.admin_api_key = f.admin_api_key;
  if (!f.api_key_file.empty()) {
    if (!c.api_key.empty()) return absl::InvalidArgumentError("give --api-key or --api-key-file, not both");
    auto key = ReadKeyFile(f.api_key_file, "--api-key-file");
    if (!key.ok()) return key.status();
    c.api_key = *std::move(key);
  }
  if (!f.admin_api_key_file.empty()) {
    if (!c.admin_api_key.empty()) return absl::InvalidArgumentError("give --admin-api-key or --admin-api-key-file, not both");
    auto key = ReadKeyFile(f.admin_api_key_file, "--admin-api-key-file");
    if (!key.ok()) return key.status();
    c.admin_api_key = *std::move(key);
  }
  if (!c.api_key.empty() && c.api_key == c.admin_api_key) {
    return absl::InvalidArgumentError("the admin key must differ from the inference key (--api-key)");
  }
  if (!f.api_keys_file.empty()) {
    auto keys = guard::ApiKeys::Load(f.api_keys_file, SteadyClock::Get());
    if (!keys.ok()) return absl::Status(keys.status().code(), absl::StrCat("--api-keys: ", keys.status().message()));
    c.api_keys = *std::move(keys);
  }
  return c;
}

// Tracing as `tide serve` runs it (docs/tracing.md): the tracer, and with export on the OTLP
// exporter behind a batch processor, the trace-context counters and their metrics.
struct TracingStack {
  tracing::TracingOptions options;
  std::unique_ptr<tracing::BatchSpanProcessor> processor;  // null: export off
  std::unique_ptr<tracing::Sampler> sampler;
  std::unique_ptr<tracing::Tracer> tracer;
  tracing::TraceContextCounters context_counters;
  std::unique_ptr<pipeline::RequestTracing> requests;      // null: export off (nothing traced)
};

absl::StatusOr<std::unique_ptr<TracingStack>> BuildTracing(const tracing::TracingFlags& flags) {
  auto options = tracing::ResolveTracingOptions(flags, tracing::ProcessEnvironment());
  if (!options.ok()) return options.status();
  auto stack = std::make_unique<TracingStack>();
  stack->options = *std::move(options);
  auto sampler = tracing::MakeSampler(stack->options);
  if (!sampler.ok()) return sampler.status();
  stack->sampler = *std::move(sampler);
  if (!stack->options.export_enabled) return stack;
  const tracing::TracingOptions& o = stack->options;
  tracing::Resource resource = tracing::MakeResource(o.service_name, o.resource_attributes);
  std::unique_ptr<tracing::SpanExporter> exporter;
  if (o.protocol == tracing::OtlpProtocol::kGrpc) {
#ifdef TIDE_HAVE_GRPC
    exporter = std::make_unique<tracing::OtlpGrpcExporter>(o.endpoint.authority(), o.headers, std::move(resource));
#else
    return absl::InvalidArgumentError("--otlp-protocol grpc: this tide was built without gRPC (use http/protobuf)");
#endif
  } else {
    exporter = std::make_unique<tracing::OtlpHttpExporter>(o.endpoint, o.headers, std::move(resource));
  }
  stack->processor = std::make_unique<tracing::BatchSpanProcessor>(o.batch, std::move(exporter));
  stack->tracer = std::make_unique<tracing::Tracer>(
      std::shared_ptr<const tracing::Sampler>(stack->sampler.get(), [](const tracing::Sampler*) {}),
      stack->processor.get());
  return stack;
}

// One span per executed batch that a sampled request rode in ("tide.batch"): a child of the first
// such request's server span (so it is sampled as that trace is, and found in its tree), with a
// link to every sampled request of the batch; each request's tide.inference span links back to it
// (serving::StageTimings::batches), so a request's neighbours in its batch are one hop away.
tracing::SpanContext ContextOf(const batching::TraceLink& l) {
  tracing::SpanContext c;
  c.trace_id = l.trace_id;
  c.span_id = l.span_id;
  c.trace_flags = l.flags;
  return c;
}

batching::BatchTraceHook BatchSpans(const tracing::Tracer* tracer) {
  return [tracer](const batching::BatchTraceFacts& f) -> std::optional<batching::TraceLink> {
    const int64_t end = tracer->clock().NowUnixNanos();
    tracing::StartSpanOptions so;
    so.parent = ContextOf(f.requests.front());
    so.start_unix_nanos = end - std::chrono::duration_cast<std::chrono::nanoseconds>(f.inference).count();
    so.links.reserve(f.requests.size());
    for (const batching::TraceLink& r : f.requests) so.links.push_back(tracing::SpanLink{ContextOf(r), {}, 0});
    tracing::Span span = tracer->StartSpan("tide.batch", std::move(so));
    if (!span.IsRecording()) return std::nullopt;
    span.SetAttribute("tide.model", f.model);
    span.SetAttribute("tide.model.version", f.version);
    if (!f.precision.empty()) span.SetAttribute("tide.model.precision", f.precision);
    span.SetAttribute("tide.batch.instance", f.instance);
    span.SetAttribute("tide.batch.rows", static_cast<int64_t>(f.rows));
    span.SetAttribute("tide.batch.padded_rows", static_cast<int64_t>(f.padded_rows));
    span.SetAttribute("tide.batch.sequence_bucket", static_cast<int64_t>(f.padded_sequence_length));
    span.SetAttribute("tide.batch.tokens", static_cast<int64_t>(f.real_tokens));
    span.SetAttribute("tide.batch.padded_tokens", static_cast<int64_t>(f.padded_tokens));
    span.SetAttribute("tide.batch.requests", static_cast<int64_t>(f.requests.size()));
    span.SetAttribute("tide.batch.alone", f.alone);
    batching::TraceLink link;
    link.trace_id = span.context().trace_id;
    link.span_id = span.context().span_id;
    link.flags = span.context().trace_flags;
    span.End(end);
    return link;
  };
}

// One span per shadow comparison of a sampled request ("tide.shadow"): it runs after the request
// was answered, so it is not the request's child but the root of its own trace, linked to the
// request's server span and recorded exactly when that request was (the sampler is not asked
// again: a root at a 1% ratio would lose almost every comparison of the requests that are kept).
serving::ShadowTraceHook ShadowSpans(const tracing::Tracer* tracer) {
  return [tracer](const serving::ShadowTraceFacts& f) {
    const int64_t end = tracer->clock().NowUnixNanos();
    tracing::StartSpanOptions so;
    so.sampled = f.request.sampled();
    so.start_unix_nanos = end - std::chrono::duration_cast<std::chrono::nanoseconds>(f.elapsed).count();
    so.links.push_back(tracing::SpanLink{ContextOf(f.request), {}, 0});
    tracing::Span span = tracer->StartSpan("tide.shadow", std::move(so));
    if (!span.IsRecording()) return;
    span.SetAttribute("tide.model", f.model);
    span.SetAttribute("tide.model.version", f.shadow_version);
    span.SetAttribute("tide.rollout.arm", serving::kArmShadow);
    span.SetAttribute("tide.shadow.live_version", f.live_version);
    span.SetAttribute("tide.shadow.live_arm", f.live_arm);
    span.SetAttribute("tide.shadow.outcome", f.outcome);
    span.SetAttribute("tide.shadow.reason", f.reason);
    if (f.agreement.has_value() && f.embedding) {
      span.SetAttribute("tide.shadow.agreement.cosine", f.agreement->cosine);
    } else if (f.agreement.has_value()) {
      span.SetAttribute("tide.shadow.agreement.spearman", f.agreement->spearman);
      span.SetAttribute("tide.shadow.agreement.top1", f.agreement->top1);
      span.SetAttribute("tide.shadow.agreement.ndcg10", f.agreement->ndcg10);
    }
    if (f.shadow_run.has_value()) {
      span.SetAttribute("tide.shadow.run_ms", std::chrono::duration<double, std::milli>(*f.shadow_run).count());
    }
    if (f.outcome == "error") span.SetStatus(tracing::StatusCode::kError, f.reason);
    span.End(end);
  };
}

// The tracing counters in /metrics: exported, dropped, failed spans and malformed trace context,
// brought up to date when /metrics is rendered (they are plain numbers in the tracer).
absl::StatusOr<std::function<void()>> TracingMetrics(metrics::Registry* registry, TracingStack* stack) {
  auto spans = registry->AddCounter(
      "tide_trace_spans_total",
      "Spans by what became of them: exported (the OTLP receiver accepted them), dropped (the export queue "
      "was full), failed (their export was given up)",
      {"outcome"});
  if (!spans.ok()) return spans.status();
  auto exports = registry->AddCounter(
      "tide_trace_exports_total", "OTLP export attempts that failed for good (failed) or were retried (retried)",
      {"outcome"});
  if (!exports.ok()) return exports.status();
  auto malformed = registry->AddCounter(
      "tide_trace_context_malformed_total",
      "Requests whose traceparent (then a new trace starts) or tracestate (then dropped) header was malformed",
      {"header"});
  if (!malformed.ok()) return malformed.status();
  struct Last {
    std::mutex mu;
    tracing::BatchSpanProcessorCounters seen;
    uint64_t traceparent = 0, tracestate = 0;
  };
  auto last = std::make_shared<Last>();
  metrics::Counter* exported = (*spans)->WithLabels({"exported"});
  metrics::Counter* dropped = (*spans)->WithLabels({"dropped"});
  metrics::Counter* failed = (*spans)->WithLabels({"failed"});
  metrics::Counter* exports_failed = (*exports)->WithLabels({"failed"});
  metrics::Counter* retried = (*exports)->WithLabels({"retried"});
  metrics::Counter* bad_parent = (*malformed)->WithLabels({"traceparent"});
  metrics::Counter* bad_state = (*malformed)->WithLabels({"tracestate"});
  return std::function<void()>([=]() {
    std::lock_guard<std::mutex> lock(last->mu);
    auto add = [](metrics::Counter* counter, uint64_t now, uint64_t& seen) {
      if (now > seen) counter->Increment(static_cast<double>(now - seen));
      seen = now;
    };
    const tracing::BatchSpanProcessorCounters c = stack->processor->counters();
    add(exported, c.exported_spans, last->seen.exported_spans);
    add(dropped, c.dropped_queue_full, last->seen.dropped_queue_full);
    add(failed, c.failed_spans, last->seen.failed_spans);
    add(exports_failed, c.failed_exports, last->seen.failed_exports);
    add(retried, c.retries, last->seen.retries);
    add(bad_parent, stack->context_counters.malformed_traceparent.load(), last->traceparent);
    add(bad_state, stack->context_counters.malformed_tracestate.load(), last->tracestate);
  });
}

int Serve(const ServeFlags& f) {
  auto level = spdlog::level::from_str(f.log_level);
  spdlog::set_level(level);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  RaiseOpenFileLimit();

  // Block the shutdown signals in every thread (they inherit the mask); this thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);  // reloads --api-keys
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // Until the server listens, SIGTERM / SIGINT end the process at once: nothing is served yet, and
  // loading and warming up models takes seconds to minutes that a rolling update or Ctrl-C should
  // not wait for.
  StartupSignalWatcher startup_signals(signals);

  // Browser-protection flags: a malformed entry would silently never match.
  for (const std::string& origin : f.cors_allow_origins) {
    if (!http::IsOriginPattern(origin)) {
      spdlog::error("--cors-allow-origin: '{}' is not an origin (scheme://host[:port] with http or https, or *)",
                    EscapeForLog(origin));
      return 1;
    }
  }
  for (const std::string& host : f.allowed_hosts) {
    if (!http::IsHostPattern(host)) {
      spdlog::error("--allowed-hosts: '{}' is not a host name or address without port (or *)", EscapeForLog(host));
      return 1;
    }
  }
  // Tracing: a bad flag or OTEL_* value refuses the start before any model loads.
  auto tracing_stack = BuildTracing(f.tracing);
  if (!tracing_stack.ok()) {
    spdlog::error("tracing: {}", std::string(tracing_stack.status().message()));
    return 1;
  }
  if ((*tracing_stack)->processor != nullptr) {
    const tracing::TracingOptions& o = (*tracing_stack)->options;
    spdlog::info("tracing: exporting spans over OTLP {} to {} (sampler {})",
                 o.protocol == tracing::OtlpProtocol::kGrpc ? "gRPC" : "HTTP/protobuf",
                 o.protocol == tracing::OtlpProtocol::kGrpc ? o.endpoint.authority()
                                                                 : absl::StrCat("http://", o.endpoint.authority(), o.endpoint.path),
                 (*tracing_stack)->sampler->Description());
  }
  // Credentials first: a bad key file is refused before minutes of model loading.
  auto credentials = LoadCredentials(f);
  if (!credentials.ok()) {
    spdlog::error("{}", std::string(credentials.status().message()));
    return 1;
  }
  // TLS first: a certificate that does not load refuses the start before any model loads.
  std::shared_ptr<tls::ServerTlsContext> tls_context;
  if (f.tls.enabled()) {
    auto created = tls::ServerTlsContext::Create(f.tls);
    if (!created.ok()) {
      spdlog::error("tls: {}", std::string(created.status().message()));
      return 1;
    }
    tls_context = *std::move(created);
    spdlog::info("tls: certificate {}{}", tls_context->description(),
                 tls_context->mutual() ? "; clients must present a certificate signed by " + f.tls.client_ca_file : "");
  }

  auto metrics = serving::ServingMetrics::Create();
  if (!metrics.ok()) {
    spdlog::error("metrics: {}", metrics.status().ToString());
    return 1;
  }
  auto mode = serving::ParseModelControlMode(f.model_control_mode);
  if (!mode.ok()) {
    spdlog::error("{}", std::string(mode.status().message()));
    return 1;
  }
  // The one loader driver (serving/model_repository_controller.h) for every control mode: mode
  // none loads the repository and the HuggingFace folders once; poll and explicit load the folders
  // once and the repository's models as they come and go.
  serving::ModelRepositoryControllerOptions lo;
  lo.mode = *mode;
  lo.repository = f.model_repository;
  if (!f.hf_model.empty()) {
    config::HuggingFaceFolderOptions hf;
    hf.folder = f.hf_model;
    hf.onnx_file = f.onnx_file;
    hf.served_model_name = f.served_model_name;
    hf.export_dir = f.export_dir;
    hf.task = f.task;
    hf.rerank_tokens = f.rerank_tokens;
    if (f.auto_export) {
      cli::PythonExportOptions export_options;
      export_options.script = f.export_script;
      hf.export_weights = [export_options](const config::HuggingFaceFolderOptions& folder) {
        return ExportWithPython(folder, export_options);
      };
    }
    lo.huggingface_folders.push_back(hf);
    if (!f.model_repository_given) lo.repository.clear();
    spdlog::info("serving HuggingFace model folder {} as model '{}'{}", f.hf_model, config::ServedModelName(hf),
                 lo.repository.empty() ? "" : " besides the model repository");
  }
  lo.poll_interval = std::chrono::seconds(f.repository_poll_secs);
  lo.startup_models = f.load_models;
  lo.model = f.model;
  lo.model.shutdown_grace = std::chrono::milliseconds(f.shutdown_grace_ms);
  lo.model.metrics = metrics->get();
  if (TracingStack* t = tracing_stack->get(); t->tracer != nullptr) lo.model.batch_trace = BatchSpans(t->tracer.get());
  // The composition root: the signature reader, the loader (LoadModel) and the backend factory (one
  // ONNX Runtime session per instance) are chosen here and injected into every served version.
  lo.repository_options.read_signature = [](const std::filesystem::path& file) {
    return runtime::OrtBackend::ReadSignature(file.string());
  };
  lo.factory = [backends = serving::OrtBackendFactory()](const config::RepositoryModel& model,
                                                         const config::ModelVersion& version,
                                                         const serving::ServedModelOptions& options)
      -> absl::StatusOr<std::unique_ptr<serving::ServedModel>> {
    auto loaded = serving::LoadModel(model, version, serving::LoaderOptions{});
    if (!loaded.ok()) return loaded.status();
    return serving::ServedModel::Create(*std::move(loaded), backends, options);
  };
  const auto load_start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<serving::ModelManager>> models = serving::ModelManager::Create(metrics->get());
  std::unique_ptr<serving::ModelRepositoryController> controller;
  {
    auto created = serving::ModelRepositoryController::Create(models->get(), lo);
    absl::Status s = created.ok() ? (*created)->Start() : created.status();
    if (s.ok()) controller = *std::move(created);
    created = absl::CancelledError();  // a failed controller goes before the manager it holds
    if (!s.ok()) models = s;
  }
  if (!models.ok()) {
    spdlog::error("loading {}: {}", f.hf_model.empty() ? "model repository " + f.model_repository
                                                        : (lo.repository.empty() ? "model folder " + f.hf_model
                                                                                 : "models"),
                  std::string(models.status().message()));
    return 1;
  }
  spdlog::info("{} loaded in {:.0f} ms", lo.repository.empty() ? "model folder " + f.hf_model
                                                                : "model repository " + f.model_repository,
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count());

  // The protocol-neutral service core (admission, tokenization workers, deadlines, breaker
  // fallback) and the HTTP edge over it.
  serving::ServiceCoreOptions co = f.core;
  co.api_key = credentials->api_key;
  co.admin_api_key = credentials->admin_api_key;
  co.api_keys = credentials->api_keys;
  if (co.api_keys != nullptr) spdlog::info("API keys: {} key(s) from {}", co.api_keys->size(), f.api_keys_file);
  // Secrets on the command line are visible to every user of the machine (/proc/PID/cmdline).
  if (!f.core.api_key.empty() && std::getenv("TIDE_API_KEY") == nullptr) {
    spdlog::warn("--api-key on the command line is visible in /proc/*/cmdline; use --api-key-file (or TIDE_API_KEY)");
  }
  if (!f.admin_api_key.empty() && std::getenv("TIDE_ADMIN_API_KEY") == nullptr) {
    spdlog::warn("--admin-api-key on the command line is visible in /proc/*/cmdline; use --admin-api-key-file");
  }
  {
    const bool tenants = !co.api_key.empty() || (co.api_keys != nullptr && co.api_keys->any_with_role(guard::kRoleTenant));
    const bool admins = !co.admin_api_key.empty() || (co.api_keys != nullptr && co.api_keys->any_with_role(guard::kRoleAdmin));
    const bool any_key = tenants || admins || (co.api_keys != nullptr && co.api_keys->size() > 0);
    if (any_key && !admins) {
      spdlog::warn("the admin API (repository, rollout) is disabled: keys are configured but none is an admin "
                   "credential (--admin-api-key-file, or role=admin in --api-keys); its routes answer 403");
    } else if (!any_key && http::DefaultAllowedHosts(f.http.host).empty()) {
      spdlog::warn("serving on {} without any API key: anyone who reaches the port may run inference and use the "
                   "admin API (set --api-key-file and --admin-api-key-file)", f.http.host);
    }
  }
  if (!f.access_log.empty()) {
    auto sink = serving::FileAccessLogSink::Open(f.access_log);
    serving::AccessLogOptions lo;
    lo.dropped = (*metrics)->access_log_dropped->WithLabels({});
    auto log = sink.ok() ? serving::AccessLog::Create(*std::move(sink), lo) : sink.status();
    if (!log.ok()) {
      spdlog::error("{}", std::string(log.status().message()));
      return 1;
    }
    co.access_log = *std::move(log);
    spdlog::info("access log: {}", f.access_log == "-" ? std::string("stdout") : f.access_log);
  }
  co.default_timeout = std::chrono::milliseconds(f.default_timeout_ms);
  co.shadow_idle_scheduling = f.shadow_scheduling == "idle";
  co.score_cache_scope =
      f.score_cache_scope == "shared" ? serving::ScoreCacheScope::kShared : serving::ScoreCacheScope::kTenant;
  co.shadow_nice = f.model.inference_nice;
  co.shadow_hold_off = std::chrono::milliseconds(f.shadow_hold_off_ms);
  co.rollout_state_file = f.rollout_state_file;
  if (TracingStack* t = tracing_stack->get(); t->tracer != nullptr) co.shadow_trace = ShadowSpans(t->tracer.get());
  if (co.max_concurrent_requests > 0) co.tokenization_queue = static_cast<size_t>(co.max_concurrent_requests);
  // The core's parts (admission, the scoring pipeline, the rollout coordinator) are built here and
  // handed to the facade, which only wires them (serving/service_core.h).
  auto parts = serving::ServiceCore::BuildParts(models->get(), metrics->get(), co);
  auto core = parts.ok() ? serving::ServiceCore::Create(models->get(), metrics->get(), co, *std::move(parts))
                         : absl::StatusOr<std::unique_ptr<serving::ServiceCore>>(parts.status());
  if (!core.ok()) {
    spdlog::error("service core: {}", core.status().ToString());
    return 1;
  }
  // After the models loaded: saved rollouts whose versions are loaded come back now, the others
  // as their versions load (a rollout config.pbtxt declares wins for its model).
  if (absl::Status s = (*core)->LoadRolloutState(); !s.ok()) {
    spdlog::error("{}", s.ToString());
    return 1;
  }
  // The one request path both edges hand their decoded requests to, with the one recorder of
  // finished requests (metrics, access log) and the request limits both edges decode under.
  if (TracingStack* t = tracing_stack->get(); t->processor != nullptr) {
    auto refresh = TracingMetrics(&(*metrics)->registry, t);
    if (!refresh.ok()) {
      spdlog::error("metrics: {}", refresh.status().ToString());
      return 1;
    }
    pipeline::RequestTracingOptions rto;
    rto.server_address = f.http.host;
    rto.http_port = f.http.port;
    rto.grpc_port = f.grpc_port;
    rto.refresh_metrics = *std::move(refresh);
    t->requests = std::make_unique<pipeline::RequestTracing>(t->tracer.get(), &t->context_counters, std::move(rto));
  }
  const pipeline::RequestPipeline request_pipeline(
      core->get(),
      pipeline::CompletionRecorder(metrics->get(), co.access_log.get(), (*tracing_stack)->requests.get()),
      f.pipeline);
  // Triton's repository extension and the rollout API: admin endpoints (the access table gives
  // them to admin keys only: --admin-api-key[-file] or role=admin in --api-keys).
  server::RepositoryRoutes repository_routes(controller.get(), server::RepositoryRoutesOptions{});
  server::RolloutRoutes rollout_routes(core->get(), server::RolloutRoutesOptions{});
  server::ServiceOptions so = f.service;
  so.allowed_hosts = f.allowed_hosts_given ? f.allowed_hosts : http::DefaultAllowedHosts(f.http.host);
  so.cors_allow_origins = f.cors_allow_origins;
  spdlog::info("allowed hosts: {}", so.allowed_hosts.empty() ? std::string("any") : absl::StrJoin(so.allowed_hosts, ", "));
  so.repository = &repository_routes;
  so.rollout = &rollout_routes;
  auto service = server::Service::Create(core->get(), &request_pipeline, so);
  if (!service.ok()) {
    spdlog::error("service: {}", service.status().ToString());
    return 1;
  }

  http::HttpServerOptions ho = f.http;
  ho.io_time_slice = std::chrono::microseconds(f.io_time_slice_us);
  ho.header_read_timeout = std::chrono::milliseconds(f.header_read_timeout_ms);
  ho.body_read_timeout = std::chrono::milliseconds(f.body_read_timeout_ms);
  ho.idle_timeout = std::chrono::milliseconds(f.idle_timeout_ms);
  ho.tls = tls_context;  // the admin listener (a copy of ho) serves HTTPS too
  auto without_kind = (*metrics)->registry.AddCounter(
      "tide_errors_without_kind_total",
      "Errors that reached an edge without an error kind (a bug: answered as internal, 500 / INTERNAL, and logged)",
      {});
  if (!without_kind.ok()) {
    spdlog::error("metrics: {}", without_kind.status().ToString());
    return 1;
  }
  const ErrorWithoutKindHookScope without_kind_hook((*without_kind)->WithLabels({}));
  auto connection_limit = (*metrics)->registry.AddCounter(
      "tide_http_connection_limit_total",
      "Connections evicted (idle or still reading a request) or refused (503, every connection busy) at the "
      "connection cap; listener=\"grpc\": --grpc-max-connections (refused: closed)",
      {"listener", "action"});
  if (!connection_limit.ok()) {
    spdlog::error("metrics: {}", connection_limit.status().ToString());
    return 1;
  }
  auto count_connection_limit = [family = *connection_limit](const char* listener) {
    metrics::Counter* evicted = family->WithLabels({listener, "evicted"});
    metrics::Counter* refused = family->WithLabels({listener, "refused"});
    return [evicted, refused](http::ConnectionLimitAction action) {
      (action == http::ConnectionLimitAction::kEvicted ? evicted : refused)->Increment();
    };
  };
  ho.on_connection_limit = count_connection_limit("main");
  auto server = http::HttpServer::Create(ho, (*service)->handler());
  if (!server.ok()) {
    spdlog::error("http server: {}", server.status().ToString());
    return 1;
  }
  if (absl::Status s = (*server)->Start(); !s.ok()) {
    spdlog::error("http server: {}", s.ToString());
    return 1;
  }
  // The admin listener: health, metrics and server metadata only, with its own connections and
  // I/O thread, so probes are answered while the main port is flooded.
  std::unique_ptr<http::HttpServer> admin;
  if (f.admin_port != 0) {
    http::HttpServerOptions ao = ho;
    ao.port = static_cast<uint16_t>(f.admin_port);
    ao.io_threads = 1;
    ao.max_body_bytes = 64 * 1024;
    ao.max_connections = kAdminMaxConnections;
    ao.on_connection_limit = count_connection_limit("admin");
    auto created = http::HttpServer::Create(ao, (*service)->admin_handler());
    absl::Status s = created.ok() ? (*created)->Start() : created.status();
    if (!s.ok()) {
      spdlog::error("admin http server: {}", s.ToString());
      return 1;
    }
    admin = *std::move(created);
  }
  // The gRPC edge over the same core.
#ifdef TIDE_HAVE_GRPC
  std::unique_ptr<grpc_edge::GrpcServer> grpc_server;
  if (f.grpc_port != 0) {
    grpc_edge::GrpcServerOptions go = f.grpc_options;
    go.handshake_timeout = std::chrono::milliseconds(f.grpc_handshake_timeout_ms);
    go.max_connection_idle = std::chrono::milliseconds(f.grpc_max_connection_idle_ms);
    go.max_connection_age = std::chrono::milliseconds(f.grpc_max_connection_age_ms);
    go.max_connection_age_grace = std::chrono::milliseconds(f.grpc_max_connection_age_grace_ms);
    go.http2_min_recv_ping_interval_without_data = std::chrono::milliseconds(f.grpc_min_recv_ping_interval_ms);
    // Connections evicted or refused at --grpc-max-connections count in the HTTP edge's family
    // (listener "grpc"); silent ones closed at the handshake timeout in a family of their own.
    auto handshake_timeouts = (*metrics)->registry.AddCounter(
        "tide_grpc_handshake_timeouts_total",
        "gRPC connections closed because the HTTP/2 preface did not arrive within --grpc-handshake-timeout-ms");
    if (!handshake_timeouts.ok()) {
      spdlog::error("metrics: {}", handshake_timeouts.status().ToString());
      return 1;
    }
    go.on_connection_event = [evicted = (*connection_limit)->WithLabels({"grpc", "evicted"}),
                              refused = (*connection_limit)->WithLabels({"grpc", "refused"}),
                              timed_out = (*handshake_timeouts)->WithLabels({})](grpc_edge::ConnectionEvent event) {
      switch (event) {
        case grpc_edge::ConnectionEvent::kEvicted: evicted->Increment(); break;
        case grpc_edge::ConnectionEvent::kRefused: refused->Increment(); break;
        case grpc_edge::ConnectionEvent::kHandshakeTimeout: timed_out->Increment(); break;
      }
    };
    go.host = ho.host;
    go.port = f.grpc_port;
    go.max_message_bytes = f.grpc_max_message_bytes;
    go.repository = controller.get();
    go.tls = tls_context;
    auto created = grpc_edge::GrpcServer::Create(core->get(), &request_pipeline, go);
    if (created.ok()) {
      grpc_server = *std::move(created);
      // The cap in force (--grpc-max-connections, lowered to fit the open-file limit).
      if (auto cap = (*metrics)->registry.AddGauge(
              "tide_grpc_max_connections",
              "gRPC connections held at most (--grpc-max-connections, lowered to keep --grpc-descriptor-reserve)");
          cap.ok()) {
        (*cap)->WithLabels({})->Set(static_cast<double>(grpc_server->max_connections()));
      }
      std::printf("tide: grpc listening on %s:%d%s\n", ho.host.c_str(), grpc_server->port(), tls_context ? " (TLS)" : "");
    } else if (f.grpc_port_given || !absl::IsUnavailable(created.status())) {
      spdlog::error("grpc server: {}", created.status().ToString());
      return 1;
    } else {
      spdlog::warn("grpc server: {}; serving without gRPC (give --grpc-port to choose a port, 0 for none)",
                   std::string(created.status().message()));
    }
  }
#else
  if (f.grpc_port != 0) spdlog::warn("--grpc-port {}: this tide was built without gRPC; serving HTTP only", f.grpc_port);
#endif
  startup_signals.Stop();  // from here on this thread waits for the signals (below)
  const char* scheme = tls_context ? "https" : "http";
  std::printf("tide: listening on %s://%s:%u\n", scheme, ho.host.c_str(), (*server)->port());
  if (admin) std::printf("tide: admin (health, metrics) on %s://%s:%u\n", scheme, ho.host.c_str(), admin->port());
  std::fflush(stdout);
  spdlog::info("ready: serving on {}://{}:{}", scheme, ho.host, (*server)->port());

  int signal_number = 0;
  for (;;) {
    sigwait(&signals, &signal_number);
    if (signal_number != SIGHUP) break;
    // SIGHUP: the TLS certificate first (new handshakes use it; open connections keep theirs; a
    // pair that does not load leaves the current one).
    if (tls_context) {
      if (absl::Status s = tls_context->Reload(); !s.ok()) {
        spdlog::error("received SIGHUP: keeping the current TLS certificate ({}): {}", tls_context->description(),
                      std::string(s.message()));
      } else {
#ifdef TIDE_HAVE_GRPC
        if (grpc_server) s = grpc_server->ReloadTls();
#endif
        if (s.ok()) {
          spdlog::info("received SIGHUP: reloaded the TLS certificate: {}", tls_context->description());
        } else {
          spdlog::error("received SIGHUP: HTTP serves the reloaded TLS certificate ({}), gRPC keeps its own: {}",
                        tls_context->description(), std::string(s.message()));
        }
      }
    }
    // SIGHUP: reopen the access log (logrotate renamed it) and reload the --api-keys file; a file
    // that does not parse leaves the current keys.
    if (co.access_log != nullptr) {
      co.access_log->Reopen();
      spdlog::info("received SIGHUP: reopening the access log {}", f.access_log);
    }
    if (f.api_keys_file.empty() && f.api_key_file.empty() && f.admin_api_key_file.empty()) {
      spdlog::info("received SIGHUP: no key file to reload");
      continue;
    }
    // Every key file is read again and swapped in together; one that does not load keeps them all.
    auto reloaded = LoadCredentials(f);
    absl::Status s = reloaded.ok() ? (*core)->SetKeys(reloaded->api_key, reloaded->admin_api_key, reloaded->api_keys)
                                   : reloaded.status();
    if (!s.ok()) {
      spdlog::error("received SIGHUP: keeping the current API keys: {}", std::string(s.message()));
      continue;
    }
    spdlog::info("received SIGHUP: reloaded the API keys ({} in the --api-keys file)",
                 reloaded->api_keys == nullptr ? size_t{0} : reloaded->api_keys->size());
  }
  spdlog::info("received {}: draining (grace {} ms)", signal_number == SIGTERM ? "SIGTERM" : "SIGINT",
               f.shutdown_grace_ms);
  // Readiness turns false first, then no new connections (gRPC: new calls UNAVAILABLE), then
  // in-flight requests finish. One
  // deadline bounds it all: the HTTP drain and the models' shutdown (queued work still there at
  // the deadline is dropped and answered 503); then at most the batches running at the deadline
  // and kShutdownFlushMargin for writing the last answers. The admin listener keeps answering
  // (readiness 503) until the end.
  const auto signalled = std::chrono::steady_clock::now();
  const auto deadline = signalled + std::chrono::milliseconds(f.shutdown_grace_ms);
  (*core)->SetDraining(true);
  controller->RequestStop();  // no load starts after this; one in progress finishes beside the drain
  (*server)->StopAccepting();
  (*server)->WaitIdle(deadline);
  // Calls of every edge admitted before the signal (gRPC's too) finish on running models.
  while ((*core)->CurrentLoad().in_flight > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Admitted calls (every edge) whose work did not finish in the grace period. Not the HTTP
  // server's active requests: a keep-alive client's request being answered 503 ("shutting down")
  // at this instant is no work left unfinished.
  const int64_t unfinished = std::max<int64_t>(0, (*core)->CurrentLoad().in_flight);
  (*models)->Shutdown(deadline);
  const auto models_stopped = std::chrono::steady_clock::now();
  (*server)->WaitIdle(std::max(deadline, models_stopped) + kShutdownFlushMargin);
#ifdef TIDE_HAVE_GRPC
  // The gRPC edge drains with HTTP: through the grace period it keeps answering, new calls
  // UNAVAILABLE at once (the core is draining; health NOT_SERVING) and calls in flight as the
  // models finish their work (waited for above); then it stops taking calls and gives the last
  // answers the flush margin before cancelling what is left (a longer deadline would only wait
  // for idle client connections).
  if (grpc_server) grpc_server->Shutdown(std::chrono::steady_clock::now() + kShutdownFlushMargin);
#endif
  if (admin) admin->Stop();
  (*server)->Stop();
  if (co.access_log != nullptr) co.access_log->Flush();  // the last answers' lines
  if (TracingStack* t = tracing_stack->get(); t->processor != nullptr) {
    // The last requests' spans: exported within the flush margin (a receiver that is down costs at
    // most that), then the exporter stops.
    const bool flushed = t->processor->Shutdown(std::chrono::steady_clock::now() + kShutdownFlushMargin * 4);
    const tracing::BatchSpanProcessorCounters c = t->processor->counters();
    if (flushed) {
      spdlog::info("tracing: flushed ({} span(s) exported, {} dropped, {} failed)", c.exported_spans,
                   c.dropped_queue_full, c.failed_spans);
    } else {
      spdlog::warn("tracing: spans left unexported at exit ({} exported, {} dropped, {} failed): {}", c.exported_spans,
                   c.dropped_queue_full, c.failed_spans, t->processor->last_error());
    }
  }
  auto ms_since_signal = [signalled](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(t - signalled).count();
  };
  spdlog::info("stopped {:.0f} ms after the signal (models stopped at {:.0f} ms; {} request(s) unfinished at the "
               "end of the grace period)",
               ms_since_signal(std::chrono::steady_clock::now()), ms_since_signal(models_stopped), unfinished);
  return 0;
}

}  // namespace

void RegisterServeCommand(CLI::App* app) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = app->add_subcommand("serve", "Serve a model repository over HTTP (TEI rerank, Cohere rerank, KServe v2) and gRPC (KServe v2, tei.v1)");
  cmd->add_option("--model-repository", flags->model_repository, "Triton-style model repository")
      ->envname("TIDE_MODEL_REPOSITORY")->capture_default_str();
  cmd->add_option("--model", flags->hf_model,
                  "HuggingFace model folder (config.json, tokenizer.json, onnx/model.onnx) served as one model; "
                  "the repository too only when --model-repository is given")
      ->envname("TIDE_MODEL");
  cmd->add_option("--onnx-file", flags->onnx_file,
                  "With --model: the ONNX file, relative to the folder or its onnx/ (e.g. model_quantized.onnx); "
                  "default onnx/model.onnx, then model.onnx")
      ->envname("TIDE_ONNX_FILE");
  cmd->add_option("--served-model-name", flags->served_model_name, "With --model: the model's name (default: the folder's)")
      ->envname("TIDE_SERVED_MODEL_NAME");
  cmd->add_option("--export-dir", flags->export_dir,
                  "With --model: where the export of a folder without ONNX is looked for (default <folder>/.tide)")
      ->envname("TIDE_EXPORT_DIR");
  cmd->add_option("--auto-export", flags->auto_export,
                  "With --model: export a folder that has only PyTorch/safetensors weights with tools/export_model.py "
                  "(false: refuse it, printing the export command)")
      ->envname("TIDE_AUTO_EXPORT")->capture_default_str();
  cmd->add_option("--export-script", flags->export_script,
                  "With --model: tools/export_model.py to run (default: ../tools/export_model.py, else "
                  "../share/tide/tools/export_model.py, beside the tide binary; never the working directory)")
      ->envname("TIDE_EXPORT_SCRIPT");
  cmd->add_option("--task", flags->task,
                  "With --model: rerank serves a decoder CausalLM folder (Qwen3ForCausalLM, Qwen2ForCausalLM) as a "
                  "reranker scored by the next-token logits of its rerank tokens")
      ->envname("TIDE_TASK")->check(CLI::IsMember({"rerank"}));
  cmd->add_option("--rerank-tokens", flags->rerank_tokens,
                  "With --model and --task rerank: YES,NO, the tokens whose logit difference is the score "
                  "(default: yes,no for Qwen3, 1,0 for Qwen2)")
      ->envname("TIDE_RERANK_TOKENS");
  cmd->add_option("--host", flags->http.host, "Address to bind (0.0.0.0 for every interface)")
      ->envname("TIDE_HOST")->capture_default_str();
  cmd->add_option("--port", flags->http.port, "Port to bind; 0 picks a free one")
      ->envname("TIDE_PORT")->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--io-threads", flags->http.io_threads, "HTTP I/O threads")
      ->envname("TIDE_IO_THREADS")->check(CLI::Range(1, 64))->capture_default_str();
  cmd->add_option("--io-time-slice-us", flags->io_time_slice_us,
                  "Scheduler time slice the HTTP threads ask for, so they preempt inference when woken (0: kernel default)")
      ->envname("TIDE_IO_TIME_SLICE_US")->check(CLI::Range(0, 100000))->capture_default_str();
  cmd->add_option("--max-body-bytes", flags->http.max_body_bytes, "Largest request body (413 above)")
      ->envname("TIDE_MAX_BODY_BYTES")->capture_default_str();
  cmd->add_option("--max-header-bytes", flags->http.max_header_bytes, "Largest request header block (431 above)")
      ->envname("TIDE_MAX_HEADER_BYTES")->capture_default_str();
  cmd->add_option("--header-read-timeout-ms", flags->header_read_timeout_ms, "Time to receive a request's headers (408)")
      ->envname("TIDE_HEADER_READ_TIMEOUT_MS")->capture_default_str();
  cmd->add_option("--body-read-timeout-ms", flags->body_read_timeout_ms, "Time to receive a request's body (408)")
      ->envname("TIDE_BODY_READ_TIMEOUT_MS")->capture_default_str();
  cmd->add_option("--idle-timeout-ms", flags->idle_timeout_ms, "Idle keep-alive connections are closed after this")
      ->envname("TIDE_IDLE_TIMEOUT_MS")->capture_default_str();
  cmd->add_option("--default-timeout-ms", flags->default_timeout_ms,
                  "Deadline of requests that set none (x-timeout-ms may shorten it); 0 = none")
      ->envname("TIDE_DEFAULT_TIMEOUT_MS")->capture_default_str();
  cmd->add_option("--max-batch-tokens", flags->model.max_batch_tokens, "Most padded tokens in one batch")
      ->envname("TIDE_MAX_BATCH_TOKENS")->capture_default_str();
  cmd->add_option("--max-documents", flags->pipeline.limits.max_documents, "Most documents in one rerank request (422 above)")
      ->envname("TIDE_MAX_DOCUMENTS")->capture_default_str();
  cmd->add_option("--max-text-bytes", flags->pipeline.limits.max_text_chars, "Longest query or document in bytes (422 above)")
      ->envname("TIDE_MAX_TEXT_BYTES")->capture_default_str();
  cmd->add_option("--shutdown-grace-ms", flags->shutdown_grace_ms, "On SIGTERM, time for in-flight requests to finish")
      ->envname("TIDE_SHUTDOWN_GRACE_MS")->capture_default_str();
  cmd->add_option("--api-key", flags->core.api_key,
                  "Require `Authorization: Bearer <key>` on inference endpoints (empty: no key); an inference key "
                  "only, never admin; on the command line it is visible in /proc: prefer --api-key-file")
      ->envname("TIDE_API_KEY");
  cmd->add_option("--api-key-file", flags->api_key_file,
                  "File holding the inference key of --api-key (one line); re-read on SIGHUP")
      ->envname("TIDE_API_KEY_FILE");
  cmd->add_option("--api-keys", flags->api_keys_file,
                  "File of API keys, one a line: KEY name=NAME [role=tenant|admin|monitor[,...]] "
                  "[requests_per_second=R] [pairs_per_second=P] [max_concurrent=C] [max_priority=N]; reloaded on "
                  "SIGHUP")
      ->envname("TIDE_API_KEYS");
  cmd->add_flag("--metrics-require-key", flags->core.access.monitor_requires_key,
                  "On the main port, /metrics, /load, /dashboard, /v2 and model readiness need a key with role "
                  "monitor or admin (the --admin-port listener always serves them without one)")
      ->envname("TIDE_METRICS_REQUIRE_KEY");
  cmd->add_option("--allowed-hosts", flags->allowed_hosts,
                  "Host header names served (comma-separated; * = any); others get 403 (DNS rebinding). Default: "
                  "localhost, 127.0.0.1, ::1 and the bind address when bound to loopback; any otherwise")
      ->envname("TIDE_ALLOWED_HOSTS")->delimiter(',');
  cmd->add_option("--cors-allow-origin", flags->cors_allow_origins,
                  "Origins (scheme://host[:port], comma-separated; * = any) whose web pages may call the inference "
                  "and open routes cross-origin (CORS preflight answered); none by default. Never the admin API")
      ->envname("TIDE_CORS_ALLOW_ORIGIN")->delimiter(',');
  cmd->add_option("--access-log", flags->access_log,
                  "Structured access log: one JSON line per answered request (HTTP and gRPC) to this file, or - "
                  "for stdout; written off the request path (lines dropped and counted in "
                  "tide_access_log_dropped_total rather than waiting); reopened on SIGHUP (logrotate)")
      ->envname("TIDE_ACCESS_LOG");
  cmd->add_option("--score-cache-bytes", flags->core.score_cache_bytes,
                  "Bytes of the per-pair score cache (an LRU of the model's logits per (model version, query, "
                  "document, options)); 0: off")
      ->envname("TIDE_SCORE_CACHE_BYTES")->capture_default_str();
  cmd->add_option("--embed-cache-bytes", flags->core.embed_cache_bytes,
                  "Bytes of the embedding cache (an LRU of an embedding model's vector per (model version, token "
                  "ids)), shared as --score-cache-scope says; 0: off")
      ->envname("TIDE_EMBED_CACHE_BYTES")->capture_default_str();
  // Tenant isolation: who shares the score cache's entries.
  cmd->add_option("--score-cache-scope", flags->score_cache_scope,
                  "Who shares score cache entries: tenant (each API key name its own, so a hit never reveals "
                  "another tenant's pair) or shared (every caller: more hits, but hit counts and latency tell a "
                  "tenant that someone scored the same pair recently)")
      ->envname("TIDE_SCORE_CACHE_SCOPE")->check(CLI::IsMember({"tenant", "shared"}))->capture_default_str();
  cmd->add_option("--max-concurrent-requests", flags->core.max_concurrent_requests,
                  "Inference requests in flight beyond which new ones get 429 at once (0: unlimited)")
      ->envname("TIDE_MAX_CONCURRENT_REQUESTS")->capture_default_str();
  cmd->add_option("--shadow-scheduling", flags->shadow_scheduling,
                  "Scheduling of a rollout's shadow lane (shadow scoring, canary duplicates): idle runs it under "
                  "SCHED_IDLE, only on CPU time nothing else wants; normal at the inference threads' priority "
                  "(--inference-nice; for test machines shared with other work)")
      ->envname("TIDE_SHADOW_SCHEDULING")->check(CLI::IsMember({"idle", "normal"}))->capture_default_str();
  cmd->add_option("--shadow-hold-off-ms", flags->shadow_hold_off_ms,
                  "A shadow batch starts only after live traffic left both versions idle (nothing queued or "
                  "running) for this long: the instants between two live batches of a busy server are not idle "
                  "capacity (0: start whenever no live row waits)")
      ->envname("TIDE_SHADOW_HOLD_OFF_MS")->check(CLI::Range(0, 60000))->capture_default_str();
  cmd->add_option("--rollout-state-file", flags->rollout_state_file,
                  "File where rollouts (started through the API or declared) are kept across restarts, rewritten "
                  "atomically on every change; read at start-up, after the models load. A rollout the model's "
                  "config.pbtxt declares wins over the saved one (empty: not kept)")
      ->envname("TIDE_ROLLOUT_STATE_FILE");
  cmd->add_option("--inference-nice", flags->model.inference_nice,
                  "Nice steps added to the inference threads so the HTTP threads preempt them (0: same priority)")
      ->envname("TIDE_INFERENCE_NICE")->check(CLI::Range(0, 19))->capture_default_str();
  cmd->add_option("--max-inflight-bytes", flags->core.max_inflight_bytes,
                  "Estimated bytes all inference requests being parsed, tokenized and scored may hold together; "
                  "beyond it new ones get 429 at once, one alone over it 413 (0: unlimited)")
      ->envname("TIDE_MAX_INFLIGHT_BYTES")->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--request-memory-factor", flags->core.request_memory_factor,
                  "A request's estimated bytes per body byte (plus 1 MiB), for --max-inflight-bytes")
      ->envname("TIDE_REQUEST_MEMORY_FACTOR")->check(CLI::Range(int64_t{1}, int64_t{1000}))->capture_default_str();
  cmd->add_option("--tokenization-workers", flags->core.tokenization_workers,
                  "Threads that parse and tokenize inference requests off the HTTP threads (0: one per core)")
      ->envname("TIDE_TOKENIZATION_WORKERS")->check(CLI::Range(0, 256))->capture_default_str();
  cmd->add_option("--malloc-trim-above-bytes", flags->core.malloc_trim_above_bytes,
                  "After in-flight request bytes reached this, return freed heap to the OS once they fall "
                  "under an eighth of it (malloc_trim; 0: never)")
      ->envname("TIDE_MALLOC_TRIM_ABOVE_BYTES")->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--max-connections", flags->http.max_connections,
                  "Open connections; at the cap a new one evicts an idle one, else 503 (all busy)")
      ->envname("TIDE_MAX_CONNECTIONS")->check(CLI::Range(size_t{1}, size_t{1} << 20))->capture_default_str();
  cmd->add_option("--admin-port", flags->admin_port,
                  "Port of a separate listener serving only health, /metrics and /v2 (0: none)")
      ->envname("TIDE_ADMIN_PORT")->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--model-control-mode", flags->model_control_mode,
                  "none: load the repository once; poll: rescan it every --repository-poll-secs and apply added, "
                  "removed and changed models and versions; explicit: load only --load-model at start, then what "
                  "the repository API loads and unloads")
      ->envname("TIDE_MODEL_CONTROL_MODE")->check(CLI::IsMember({"none", "poll", "explicit"}))->capture_default_str();
  cmd->add_option("--repository-poll-secs", flags->repository_poll_secs,
                  "With --model-control-mode poll: seconds between rescans of the model repository")
      ->envname("TIDE_REPOSITORY_POLL_SECS")->check(CLI::Range(int64_t{1}, int64_t{86400}))->capture_default_str();
  cmd->add_option("--load-model", flags->load_models,
                  "With --model-control-mode explicit: a model to load at start (repeatable; * = every model)")
      ->envname("TIDE_LOAD_MODEL")->delimiter(',');
  cmd->add_option("--admin-api-key", flags->admin_api_key,
                  "The admin key: `Authorization: Bearer <key>` on the repository and rollout APIs (HTTP and gRPC); "
                  "prefer --admin-api-key-file. With other keys but no admin credential the admin API is disabled")
      ->envname("TIDE_ADMIN_API_KEY");
  cmd->add_option("--admin-api-key-file", flags->admin_api_key_file,
                  "File holding the admin key (one line); re-read on SIGHUP")
      ->envname("TIDE_ADMIN_API_KEY_FILE");
  cmd->add_option("--grpc-port", flags->grpc_port,
                  "Port of the gRPC edge (KServe v2 GRPCInferenceService, TEI tei.v1, grpc.health.v1); 0: no gRPC")
      ->envname("TIDE_GRPC_PORT")->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--grpc-max-message-bytes", flags->grpc_max_message_bytes,
                  "Largest gRPC request message (RESOURCE_EXHAUSTED above)")
      ->envname("TIDE_GRPC_MAX_MESSAGE_BYTES")->check(CLI::Range(int64_t{1}, int64_t{2147483647}))->capture_default_str();
#ifdef TIDE_HAVE_GRPC
  // gRPC connections (docs/security.md "gRPC connection limits").
  cmd->add_option("--grpc-max-connections", flags->grpc_options.max_connections,
                  "Open gRPC connections; at the cap a new one evicts a silent (no HTTP/2 preface) or idle one, "
                  "else is refused (every connection has a call in flight)")
      ->envname("TIDE_GRPC_MAX_CONNECTIONS")->check(CLI::Range(size_t{1}, size_t{1} << 20))->capture_default_str();
  cmd->add_option("--grpc-handshake-timeout-ms", flags->grpc_handshake_timeout_ms,
                  "A gRPC connection that has not sent the HTTP/2 preface this long after accept is closed")
      ->envname("TIDE_GRPC_HANDSHAKE_TIMEOUT_MS")->check(CLI::Range(int64_t{1}, int64_t{3600000}))->capture_default_str();
  cmd->add_option("--grpc-descriptor-reserve", flags->grpc_options.descriptor_reserve,
                  "Descriptors kept spare under the open-file limit beyond --grpc-max-connections (the cap is "
                  "lowered to fit), for the HTTP and admin listeners")
      ->envname("TIDE_GRPC_DESCRIPTOR_RESERVE")->check(CLI::Range(size_t{0}, size_t{1} << 20))->capture_default_str();
  cmd->add_option("--grpc-max-concurrent-streams", flags->grpc_options.max_concurrent_streams,
                  "Concurrent gRPC calls (HTTP/2 streams) per connection")
      ->envname("TIDE_GRPC_MAX_CONCURRENT_STREAMS")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--grpc-max-connection-idle-ms", flags->grpc_max_connection_idle_ms,
                  "A gRPC connection without calls this long gets GOAWAY (0: never)")
      ->envname("TIDE_GRPC_MAX_CONNECTION_IDLE_MS")->check(CLI::Range(int64_t{0}, int64_t{2147483647}))->capture_default_str();
  cmd->add_option("--grpc-max-connection-age-ms", flags->grpc_max_connection_age_ms,
                  "A gRPC connection this old (+-10%) gets GOAWAY; clients reconnect (0: never)")
      ->envname("TIDE_GRPC_MAX_CONNECTION_AGE_MS")->check(CLI::Range(int64_t{0}, int64_t{2147483647}))->capture_default_str();
  cmd->add_option("--grpc-max-connection-age-grace-ms", flags->grpc_max_connection_age_grace_ms,
                  "After the age GOAWAY, time the connection's calls have to finish (0: unlimited)")
      ->envname("TIDE_GRPC_MAX_CONNECTION_AGE_GRACE_MS")->check(CLI::Range(int64_t{0}, int64_t{2147483647}))->capture_default_str();
  cmd->add_option("--grpc-http2-min-recv-ping-interval-without-data", flags->grpc_min_recv_ping_interval_ms,
                  "Milliseconds: a client ping sooner than this after the last one, with no data between, is a strike")
      ->envname("TIDE_GRPC_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA")
      ->check(CLI::Range(int64_t{0}, int64_t{2147483647}))->capture_default_str();
  cmd->add_option("--grpc-http2-max-ping-strikes", flags->grpc_options.http2_max_ping_strikes,
                  "Ping strikes before the connection gets GOAWAY ENHANCE_YOUR_CALM (0: unlimited)")
      ->envname("TIDE_GRPC_HTTP2_MAX_PING_STRIKES")->check(CLI::Range(0, 1 << 20))->capture_default_str();
#endif
  // TLS (tls/tls_context.h).
  cmd->add_option("--tls-cert-file", flags->tls.cert_file,
                  "PEM certificate chain (leaf first): serve HTTPS, and TLS on the gRPC edge and the admin "
                  "listener; reloaded on SIGHUP (needs --tls-key-file; none: plaintext)")
      ->envname("TIDE_TLS_CERT_FILE");
  cmd->add_option("--tls-key-file", flags->tls.key_file, "PEM private key of --tls-cert-file (unencrypted)")
      ->envname("TIDE_TLS_KEY_FILE");
  cmd->add_option("--tls-client-ca-file", flags->tls.client_ca_file,
                  "PEM CA bundle: require clients to present a certificate it signed (mutual TLS)")
      ->envname("TIDE_TLS_CLIENT_CA_FILE");
  // Tracing (docs/tracing.md): the OpenTelemetry environment (OTEL_EXPORTER_OTLP_*, OTEL_TRACES_*,
  // OTEL_SERVICE_NAME, ...) is read as the SDKs read it; a flag wins over it.
  cmd->add_option("--trace-export", flags->tracing.export_enabled,
                  "Export OpenTelemetry spans over OTLP: true or false (default: on when an endpoint is set by "
                  "--otlp-endpoint, OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)");
  cmd->add_option("--otlp-endpoint", flags->tracing.endpoint,
                  "OTLP receiver base URL (http://host:port; http/protobuf appends /v1/traces); setting it turns "
                  "export on (default: OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318, grpc :4317)");
  cmd->add_option("--otlp-protocol", flags->tracing.protocol,
                  "http/protobuf or grpc (default: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL, "
                  "else http/protobuf)");
  cmd->add_option("--trace-sampler", flags->tracing.sampler,
                  "always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, "
                  "parentbased_traceidratio (default: OTEL_TRACES_SAMPLER, else parentbased_always_on)");
  cmd->add_option("--trace-sampler-arg", flags->tracing.sampler_arg,
                  "The traceidratio samplers' ratio, 0 to 1 (default: OTEL_TRACES_SAMPLER_ARG, else 1.0)");
  cmd->add_option("--service-name", flags->tracing.service_name,
                  "service.name of the spans (default: OTEL_SERVICE_NAME, else OTEL_RESOURCE_ATTRIBUTES' "
                  "service.name, else tide)");
  cmd->add_option("--log-level", flags->log_level, "trace, debug, info, warn, error")
      ->envname("TIDE_LOG_LEVEL")->capture_default_str();
  cmd->callback([flags, cmd]() {
    flags->model_repository_given = cmd->get_option("--model-repository")->count() > 0;
    flags->grpc_port_given = cmd->get_option("--grpc-port")->count() > 0;
    flags->allowed_hosts_given = cmd->get_option("--allowed-hosts")->count() > 0 || std::getenv("TIDE_ALLOWED_HOSTS") != nullptr;
    const int rc = Serve(*flags);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace tide::cli
