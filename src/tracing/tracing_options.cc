#include "tracing/tracing_options.h"

#include <cstdlib>

#include "common/absl_view.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tracing/key_value_list.h"

namespace tide::tracing {
namespace {

using common::AbslView;

// A value and where it came from ("--otlp-protocol", "OTEL_EXPORTER_OTLP_PROTOCOL").
struct Setting {
  std::string value;
  std::string source;
};

class Reader {
 public:
  explicit Reader(const EnvLookup& env) : env_(env) {}

  std::optional<Setting> Env(std::string_view name) const {
    std::optional<std::string> value = env_(name);
    if (!value || value->empty()) return std::nullopt;
    return Setting{std::move(*value), std::string(name)};
  }
  // The first of: the flag, then each variable in order.
  std::optional<Setting> First(const std::optional<std::string>& flag, std::string_view flag_name,
                               std::initializer_list<std::string_view> names) const {
    if (flag) return Setting{*flag, std::string(flag_name)};
    for (std::string_view name : names) {
      if (std::optional<Setting> s = Env(name)) return s;
    }
    return std::nullopt;
  }

 private:
  const EnvLookup& env_;
};

absl::Status Bad(const Setting& s, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(s.source, "=\"", s.value, "\": ", AbslView(why)));
}

absl::StatusOr<int64_t> NonNegative(const Setting& s, std::string_view unit) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(s.value, &v) || v < 0) {
    return Bad(s, absl::StrCat("expected a whole number of ", AbslView(unit), " (0 or more)"));
  }
  return v;
}

// Header names that are HTTP tokens and valid gRPC metadata keys alike.
bool ValidHeaderName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

bool ValidHeaderValue(std::string_view value) {
  for (char c : value) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) return false;
  }
  return true;
}

std::string JoinPath(std::string_view base_path, std::string_view suffix) {
  std::string path(base_path);
  if (!path.empty() && path.back() == '/') path.pop_back();
  return absl::StrCat(path, AbslView(suffix));
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

absl::StatusOr<TracingOptions> ResolveTracingOptions(const TracingFlags& flags, const EnvLookup& env) {
  const Reader r(env);
  TracingOptions options;

  // Protocol.
  if (std::optional<Setting> s = r.First(flags.protocol, "--otlp-protocol",
                                         {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"})) {
    if (s->value == "http/protobuf") {
      options.protocol = OtlpProtocol::kHttpProtobuf;
    } else if (s->value == "grpc") {
      options.protocol = OtlpProtocol::kGrpc;
    } else if (s->value == "http/json") {
      return Bad(*s, "http/json is not supported; use http/protobuf or grpc");
    } else {
      return Bad(*s, "unknown protocol; use http/protobuf or grpc");
    }
  }
  const bool grpc = options.protocol == OtlpProtocol::kGrpc;

  // Endpoint: the traces-specific variable as-is, else a base URL.
  std::optional<Setting> endpoint;
  bool base = true;
  if (flags.endpoint) {
    endpoint = Setting{*flags.endpoint, "--otlp-endpoint"};
  } else if ((endpoint = r.Env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))) {
    base = false;
  } else {
    endpoint = r.Env("OTEL_EXPORTER_OTLP_ENDPOINT");
  }
  if (endpoint) {
    absl::StatusOr<Endpoint> parsed = ParseEndpoint(endpoint->value);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(endpoint->source, ": ", parsed.status().message()));
    }
    options.endpoint = *std::move(parsed);
    if (!grpc && base) options.endpoint.path = JoinPath(options.endpoint.path, "/v1/traces");
  } else {
    options.endpoint = Endpoint{"localhost", static_cast<uint16_t>(grpc ? 4317 : 4318), grpc ? "" : "/v1/traces"};
  }

  // On or off.
  bool disabled = false;
  if (std::optional<Setting> s = r.Env("OTEL_SDK_DISABLED")) {
    const std::string v = absl::AsciiStrToLower(s->value);
    if (v != "true" && v != "false") return Bad(*s, "expected true or false");
    disabled = v == "true";
  }
  if (std::optional<Setting> s = r.Env("OTEL_TRACES_EXPORTER")) {
    if (s->value == "none") {
      disabled = true;
    } else if (s->value != "otlp") {
      return Bad(*s, "tide exports traces with otlp only (or none)");
    }
  }
  options.export_enabled = flags.export_enabled ? *flags.export_enabled : (endpoint.has_value() && !disabled);

  // Headers and the attempt timeout.
  if (std::optional<Setting> s = r.First(std::nullopt, "", {"OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                                                            "OTEL_EXPORTER_OTLP_HEADERS"})) {
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> headers = ParseKeyValueList(s->value, s->source);
    if (!headers.ok()) return headers.status();
    for (const auto& [name, value] : *headers) {
      if (!ValidHeaderName(name)) {
        return Bad(*s, absl::StrCat("\"", name, "\" is not a header name (letters, digits, '-', '_', '.')"));
      }
      if (!ValidHeaderValue(value)) {
        return Bad(*s, absl::StrCat("the value of \"", name, "\" has control characters"));
      }
    }
    options.headers = *std::move(headers);
  }
  if (std::optional<Setting> s = r.First(std::nullopt, "", {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                                                            "OTEL_EXPORTER_OTLP_TIMEOUT"})) {
    absl::StatusOr<int64_t> ms = NonNegative(*s, "milliseconds");
    if (!ms.ok()) return ms.status();
    if (*ms == 0) return Bad(*s, "the timeout must be more than 0");
    options.batch.attempt_timeout = std::chrono::milliseconds(*ms);
  }

  // Sampler.
  std::optional<Setting> sampler_arg = r.First(flags.sampler_arg, "--trace-sampler-arg", {"OTEL_TRACES_SAMPLER_ARG"});
  if (sampler_arg) options.sampler_arg = sampler_arg->value;
  if (std::optional<Setting> s = r.First(flags.sampler, "--trace-sampler", {"OTEL_TRACES_SAMPLER"})) {
    options.sampler = s->value;
  }
  if (absl::StatusOr<std::unique_ptr<Sampler>> by_name = tracing::MakeSampler(options.sampler, std::nullopt);
      !by_name.ok()) {
    const std::string source = flags.sampler ? "--trace-sampler" : "OTEL_TRACES_SAMPLER";
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", by_name.status().message()));
  }
  if (absl::StatusOr<std::unique_ptr<Sampler>> sampler = MakeSampler(options); !sampler.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(sampler_arg->source, ": ", sampler.status().message()));
  }

  // Resource.
  if (std::optional<Setting> s = r.Env("OTEL_RESOURCE_ATTRIBUTES")) {
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> attributes =
        ParseKeyValueList(s->value, s->source);
    if (!attributes.ok()) return attributes.status();
    for (auto& [key, value] : *attributes) options.resource_attributes.push_back(Attribute{key, value});
  }
  if (std::optional<Setting> s = r.First(flags.service_name, "--service-name", {"OTEL_SERVICE_NAME"})) {
    options.service_name = s->value;
  }

  // Batch processor.
  if (std::optional<Setting> s = r.Env("OTEL_BSP_SCHEDULE_DELAY")) {
    absl::StatusOr<int64_t> ms = NonNegative(*s, "milliseconds");
    if (!ms.ok()) return ms.status();
    options.batch.schedule_delay = std::chrono::milliseconds(*ms);
  }
  if (std::optional<Setting> s = r.Env("OTEL_BSP_EXPORT_TIMEOUT")) {
    absl::StatusOr<int64_t> ms = NonNegative(*s, "milliseconds");
    if (!ms.ok()) return ms.status();
    if (*ms == 0) return Bad(*s, "the timeout must be more than 0");
    options.batch.export_timeout = std::chrono::milliseconds(*ms);
  }
  std::optional<Setting> queue = r.Env("OTEL_BSP_MAX_QUEUE_SIZE");
  if (queue) {
    absl::StatusOr<int64_t> n = NonNegative(*queue, "spans");
    if (!n.ok()) return n.status();
    if (*n == 0) return Bad(*queue, "the queue must hold at least 1 span");
    options.batch.max_queue_size = static_cast<size_t>(*n);
  }
  std::optional<Setting> batch = r.Env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE");
  if (batch) {
    absl::StatusOr<int64_t> n = NonNegative(*batch, "spans");
    if (!n.ok()) return n.status();
    if (*n == 0) return Bad(*batch, "a batch must hold at least 1 span");
    options.batch.max_export_batch_size = static_cast<size_t>(*n);
  }
  if (options.batch.max_export_batch_size > options.batch.max_queue_size) {
    if (batch) {
      return Bad(*batch, absl::StrCat("must not exceed the queue size (", options.batch.max_queue_size, ")"));
    }
    options.batch.max_export_batch_size = options.batch.max_queue_size;  // only the queue was lowered
  }
  return options;
}

absl::StatusOr<std::unique_ptr<Sampler>> MakeSampler(const TracingOptions& options) {
  std::optional<std::string_view> arg;
  if (options.sampler_arg) arg = *options.sampler_arg;
  return tracing::MakeSampler(options.sampler, arg);
}

}  // namespace tide::tracing
