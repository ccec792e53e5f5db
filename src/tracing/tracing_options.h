// tide::tracing TracingOptions: the tracing configuration from `tide serve`'s flags and the standard
// OpenTelemetry environment variables, resolved and validated once at start.
//
// Contract:
//  - Precedence, as in the OpenTelemetry SDKs: an explicit flag over the environment, a
//    traces-specific variable (OTEL_EXPORTER_OTLP_TRACES_*) over the general one
//    (OTEL_EXPORTER_OTLP_*), over the default. An empty variable counts as unset.
//  - Export is on when flags.export_enabled says so, else when an endpoint is set (the flag,
//    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT); OTEL_SDK_DISABLED=true or
//    OTEL_TRACES_EXPORTER=none turn it off unless the flag turns it on. On without an endpoint means
//    the default one (http://localhost:4318, or http://localhost:4317 for grpc).
//  - Endpoint: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as-is; the flag and
//    OTEL_EXPORTER_OTLP_ENDPOINT are a base to which http/protobuf appends /v1/traces; gRPC uses
//    host:port of any of them. http:// only (https is refused: not supported yet).
//  - Protocol: flag, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL; http/protobuf
//    (default) or grpc (http/json is refused).
//  - Headers: OTEL_EXPORTER_OTLP_TRACES_HEADERS else OTEL_EXPORTER_OTLP_HEADERS (key=value list;
//    names of letters, digits, '-', '_', '.', values without control characters).
//    Attempt timeout: OTEL_EXPORTER_OTLP_TRACES_TIMEOUT else OTEL_EXPORTER_OTLP_TIMEOUT (ms, 10000).
//  - Sampler: flag, OTEL_TRACES_SAMPLER (default parentbased_always_on); argument: flag,
//    OTEL_TRACES_SAMPLER_ARG; checked by MakeSampler.
//  - Resource: service name from the flag, OTEL_SERVICE_NAME, else service.name of
//    OTEL_RESOURCE_ATTRIBUTES, else "tide"; OTEL_RESOURCE_ATTRIBUTES parsed by ParseKeyValueList.
//  - Batch processor: OTEL_BSP_SCHEDULE_DELAY (ms, 5000), OTEL_BSP_EXPORT_TIMEOUT (ms, 30000),
//    OTEL_BSP_MAX_QUEUE_SIZE (2048, > 0), OTEL_BSP_MAX_EXPORT_BATCH_SIZE (512, > 0, <= queue).
//  - Any bad value → kInvalidArgument whose message names the flag or variable, the value and what
//    is allowed, for the composition root to refuse the start with. Nothing is read but `env`.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tracing/batch_span_processor.h"
#include "tracing/endpoint.h"
#include "tracing/sampler.h"
#include "tracing/span_data.h"

namespace tide::tracing {

// What `tide serve` was given explicitly (nullopt: the flag was not used).
struct TracingFlags {
  std::optional<bool> export_enabled;       // --trace-export
  std::optional<std::string> endpoint;      // --otlp-endpoint (a base URL)
  std::optional<std::string> protocol;      // --otlp-protocol
  std::optional<std::string> sampler;       // --trace-sampler
  std::optional<std::string> sampler_arg;   // --trace-sampler-arg
  std::optional<std::string> service_name;  // --service-name
};

enum class OtlpProtocol { kHttpProtobuf, kGrpc };

struct TracingOptions {
  bool export_enabled = false;
  OtlpProtocol protocol = OtlpProtocol::kHttpProtobuf;
  // http/protobuf: the URL to POST to, path included; grpc: endpoint.authority() is the target.
  Endpoint endpoint;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string sampler = "parentbased_always_on";
  std::optional<std::string> sampler_arg;
  std::string service_name;  // "" = from the resource attributes or "tide" (MakeResource)
  std::vector<Attribute> resource_attributes;
  BatchSpanProcessorOptions batch;
};

using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
// The process environment (getenv), for production.
EnvLookup ProcessEnvironment();

absl::StatusOr<TracingOptions> ResolveTracingOptions(const TracingFlags& flags, const EnvLookup& env);

// The sampler the options name (they were validated, so this only fails for options built by hand).
absl::StatusOr<std::unique_ptr<Sampler>> MakeSampler(const TracingOptions& options);

}  // namespace tide::tracing
