#include "tracing/tracing_options.h"

#include <map>

#include "gtest/gtest.h"

namespace tide::tracing {
namespace {

using std::chrono::milliseconds;

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TracingOptions Resolve(const TracingFlags& flags, std::map<std::string, std::string> vars) {
  absl::StatusOr<TracingOptions> options = ResolveTracingOptions(flags, Env(std::move(vars)));
  EXPECT_TRUE(options.ok()) << options.status();
  return options.ok() ? *options : TracingOptions{};
}

std::string Error(const TracingFlags& flags, std::map<std::string, std::string> vars) {
  absl::StatusOr<TracingOptions> options = ResolveTracingOptions(flags, Env(std::move(vars)));
  EXPECT_FALSE(options.ok());
  return options.ok() ? "" : std::string(options.status().message());
}

TEST(TracingOptionsTest, DefaultsExportOff) {
  const TracingOptions o = Resolve({}, {});
  EXPECT_FALSE(o.export_enabled);
  EXPECT_EQ(o.protocol, OtlpProtocol::kHttpProtobuf);
  EXPECT_EQ(o.sampler, "parentbased_always_on");
  EXPECT_EQ(o.batch.max_queue_size, 2048u);
  EXPECT_EQ(o.batch.max_export_batch_size, 512u);
  EXPECT_EQ(o.batch.schedule_delay, milliseconds(5000));
  EXPECT_EQ(o.batch.export_timeout, milliseconds(30000));
  EXPECT_EQ(o.batch.attempt_timeout, milliseconds(10000));
  EXPECT_TRUE(MakeSampler(o).ok());
}

TEST(TracingOptionsTest, TheGeneralEndpointAloneTurnsExportOnAndGetsTheTracesPath) {
  TracingOptions o = Resolve({}, {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"}});
  EXPECT_TRUE(o.export_enabled);
  EXPECT_EQ(o.endpoint.authority(), "collector:4318");
  EXPECT_EQ(o.endpoint.path, "/v1/traces");
  o = Resolve({}, {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/base/"}});
  EXPECT_EQ(o.endpoint.path, "/base/v1/traces");
}

TEST(TracingOptionsTest, TheTracesEndpointIsUsedAsIsAndWinsOverTheGeneralOne) {
  const TracingOptions o = Resolve({}, {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:1"},
                                        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:2/custom"}});
  EXPECT_TRUE(o.export_enabled);
  EXPECT_EQ(o.endpoint.authority(), "traces:2");
  EXPECT_EQ(o.endpoint.path, "/custom");
}

TEST(TracingOptionsTest, FlagsWinOverTheEnvironment) {
  TracingFlags flags;
  flags.endpoint = "http://flag:9";
  flags.protocol = "grpc";
  flags.sampler = "traceidratio";
  flags.sampler_arg = "0.25";
  flags.service_name = "from-flag";
  const TracingOptions o = Resolve(flags, {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://env:2"},
                                           {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"},
                                           {"OTEL_TRACES_SAMPLER", "always_off"},
                                           {"OTEL_TRACES_SAMPLER_ARG", "0.5"},
                                           {"OTEL_SERVICE_NAME", "from-env"}});
  EXPECT_TRUE(o.export_enabled);
  EXPECT_EQ(o.protocol, OtlpProtocol::kGrpc);
  EXPECT_EQ(o.endpoint.authority(), "flag:9");
  EXPECT_EQ(o.endpoint.path, "");  // gRPC: no /v1/traces
  EXPECT_EQ(o.sampler, "traceidratio");
  EXPECT_EQ(o.sampler_arg, "0.25");
  EXPECT_EQ(o.service_name, "from-flag");
}

TEST(TracingOptionsTest, SignalSpecificProtocolWinsAndGrpcDefaultsToPort4317) {
  TracingFlags flags;
  flags.export_enabled = true;
  const TracingOptions o = Resolve(flags, {{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"},
                                           {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"}});
  EXPECT_TRUE(o.export_enabled);
  EXPECT_EQ(o.protocol, OtlpProtocol::kGrpc);
  EXPECT_EQ(o.endpoint.authority(), "localhost:4317");
  flags.protocol = "http/protobuf";
  const TracingOptions h = Resolve(flags, {});
  EXPECT_EQ(h.endpoint.authority(), "localhost:4318");
  EXPECT_EQ(h.endpoint.path, "/v1/traces");
}

TEST(TracingOptionsTest, ExportCanBeTurnedOff) {
  std::map<std::string, std::string> env{{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:1"}};
  TracingFlags off;
  off.export_enabled = false;
  EXPECT_FALSE(Resolve(off, env).export_enabled);
  env["OTEL_SDK_DISABLED"] = "true";
  EXPECT_FALSE(Resolve({}, env).export_enabled);
  env["OTEL_SDK_DISABLED"] = "false";
  env["OTEL_TRACES_EXPORTER"] = "none";
  EXPECT_FALSE(Resolve({}, env).export_enabled);
  env.erase("OTEL_TRACES_EXPORTER");
  env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "";  // empty = unset
  EXPECT_FALSE(Resolve({}, env).export_enabled);
}

TEST(TracingOptionsTest, HeadersTimeoutsResourceAndBatchSettings) {
  const TracingOptions o = Resolve({}, {{"OTEL_EXPORTER_OTLP_HEADERS", "general=1"},
                                        {"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "api-key=a%20b,x-tenant=t"},
                                        {"OTEL_EXPORTER_OTLP_TIMEOUT", "2000"},
                                        {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1500"},
                                        {"OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod,service.name=svc"},
                                        {"OTEL_BSP_SCHEDULE_DELAY", "100"},
                                        {"OTEL_BSP_EXPORT_TIMEOUT", "700"},
                                        {"OTEL_BSP_MAX_QUEUE_SIZE", "64"},
                                        {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "16"}});
  EXPECT_EQ(o.headers, (std::vector<std::pair<std::string, std::string>>{{"api-key", "a b"}, {"x-tenant", "t"}}));
  EXPECT_EQ(o.batch.attempt_timeout, milliseconds(1500));
  ASSERT_EQ(o.resource_attributes.size(), 2u);
  EXPECT_EQ(o.resource_attributes[1], (Attribute{"service.name", std::string("svc")}));
  EXPECT_EQ(o.service_name, "");
  EXPECT_EQ(o.batch.schedule_delay, milliseconds(100));
  EXPECT_EQ(o.batch.export_timeout, milliseconds(700));
  EXPECT_EQ(o.batch.max_queue_size, 64u);
  EXPECT_EQ(o.batch.max_export_batch_size, 16u);
  // A queue below the default batch size lowers the batch with it.
  EXPECT_EQ(Resolve({}, {{"OTEL_BSP_MAX_QUEUE_SIZE", "100"}}).batch.max_export_batch_size, 100u);
}

TEST(TracingOptionsTest, BadValuesAreRefusedNamingTheirSource) {
  EXPECT_EQ(Error({}, {{"OTEL_TRACES_SAMPLER", "sometimes"}}).rfind("OTEL_TRACES_SAMPLER: unknown sampler", 0), 0u);
  TracingFlags sampler_flag;
  sampler_flag.sampler = "nope";
  EXPECT_EQ(Error(sampler_flag, {}).rfind("--trace-sampler: unknown sampler \"nope\"", 0), 0u);
  EXPECT_EQ(Error({}, {{"OTEL_TRACES_SAMPLER", "traceidratio"}, {"OTEL_TRACES_SAMPLER_ARG", "2"}})
                .rfind("OTEL_TRACES_SAMPLER_ARG: sampler argument \"2\"", 0),
            0u);
  EXPECT_NE(Error({}, {{"OTEL_EXPORTER_OTLP_PROTOCOL", "udp"}}).find("OTEL_EXPORTER_OTLP_PROTOCOL=\"udp\""),
            std::string::npos);
  EXPECT_NE(Error({}, {{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"}}).find("not supported"), std::string::npos);
  TracingFlags protocol_flag;
  protocol_flag.protocol = "tcp";
  EXPECT_EQ(Error(protocol_flag, {}).rfind("--otlp-protocol=\"tcp\"", 0), 0u);
  EXPECT_EQ(Error({}, {{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"}}).rfind("OTEL_EXPORTER_OTLP_ENDPOINT: ", 0),
            0u);
  EXPECT_NE(Error({}, {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://c"}}).find("https is not supported"),
            std::string::npos);
  TracingFlags endpoint_flag;
  endpoint_flag.endpoint = "ftp://x";
  EXPECT_EQ(Error(endpoint_flag, {}).rfind("--otlp-endpoint: ", 0), 0u);
  EXPECT_NE(Error({}, {{"OTEL_RESOURCE_ATTRIBUTES", "a=%zz"}}).find("OTEL_RESOURCE_ATTRIBUTES"), std::string::npos);
  EXPECT_NE(Error({}, {{"OTEL_EXPORTER_OTLP_HEADERS", "novalue"}}).find("OTEL_EXPORTER_OTLP_HEADERS"),
            std::string::npos);
  EXPECT_NE(Error({}, {{"OTEL_EXPORTER_OTLP_HEADERS", "bad key=1"}}).find("\"bad key\" is not a header name"),
            std::string::npos);
  EXPECT_NE(Error({}, {{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "k=a%0D%0Ab"}}).find("control characters"),
            std::string::npos);
  EXPECT_NE(Error({}, {{"OTEL_BSP_MAX_QUEUE_SIZE", "0"}}).find("OTEL_BSP_MAX_QUEUE_SIZE"), std::string::npos);
  EXPECT_NE(Error({}, {{"OTEL_BSP_SCHEDULE_DELAY", "-5"}}).find("whole number"), std::string::npos);
  EXPECT_NE(Error({}, {{"OTEL_EXPORTER_OTLP_TIMEOUT", "soon"}}).find("OTEL_EXPORTER_OTLP_TIMEOUT"),
            std::string::npos);
  EXPECT_NE(Error({}, {{"OTEL_BSP_MAX_QUEUE_SIZE", "10"}, {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "20"}})
                .find("must not exceed the queue size (10)"),
            std::string::npos);
  EXPECT_NE(Error({}, {{"OTEL_SDK_DISABLED", "maybe"}}).find("true or false"), std::string::npos);
  EXPECT_NE(Error({}, {{"OTEL_TRACES_EXPORTER", "zipkin"}}).find("otlp only"), std::string::npos);
}

}  // namespace
}  // namespace tide::tracing
