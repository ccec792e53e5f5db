#include "tracing/otlp_http_exporter.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace tide::tracing {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

bool Retryable(unsigned status) { return status == 429 || status == 502 || status == 503 || status == 504; }

}  // namespace

OtlpHttpExporter::OtlpHttpExporter(Endpoint endpoint, std::vector<std::pair<std::string, std::string>> headers,
                                   Resource resource)
    : endpoint_(std::move(endpoint)), headers_(std::move(headers)), resource_(std::move(resource)) {
  if (endpoint_.path.empty()) endpoint_.path = "/";
}

ExportResult OtlpHttpExporter::Export(const std::vector<SpanData>& spans, std::chrono::milliseconds timeout) {
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest request;
  EncodeExportRequest(spans, resource_, &request);

  http::request<http::string_body> req{http::verb::post, endpoint_.path, 11};
  req.set(http::field::host, endpoint_.authority());
  req.set(http::field::content_type, "application/x-protobuf");
  req.set(http::field::user_agent, "tide-otlp-exporter");
  for (const auto& [name, value] : headers_) req.set(name, value);
  if (!request.SerializeToString(&req.body())) return ExportResult::Failed("could not encode the spans");
  req.prepare_payload();

  asio::io_context io;
  beast::tcp_stream stream(io);
  tcp::resolver resolver(io);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1 << 20);
  beast::error_code error;
  const char* stage = "resolve";
  stream.expires_after(timeout);

  resolver.async_resolve(
      endpoint_.host, std::to_string(endpoint_.port), [&](beast::error_code ec, tcp::resolver::results_type results) {
        if (ec) return void(error = ec);
        stage = "connect";
        stream.async_connect(results, [&](beast::error_code ec, const tcp::endpoint&) {
          if (ec) return void(error = ec);
          stage = "write";
          http::async_write(stream, req, [&](beast::error_code ec, size_t) {
            if (ec) return void(error = ec);
            stage = "read";
            http::async_read(stream, buffer, parser, [&](beast::error_code ec, size_t) { error = ec; });
          });
        });
      });
  // The resolver has no deadline of its own: run no longer than the timeout (plus a little for the
  // stream's own expiry to fire first).
  io.run_for(timeout + std::chrono::milliseconds(50));
  if (!io.stopped()) {
    stream.socket().close(error);
    return ExportResult::Retryable(absl::StrCat("OTLP/HTTP ", endpoint_.authority(), ": timed out at ", stage));
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  if (error) {
    return ExportResult::Retryable(
        absl::StrCat("OTLP/HTTP ", endpoint_.authority(), ": ", stage, " failed: ", error.message()));
  }
  const http::response<http::string_body>& response = parser.get();
  const unsigned status = response.result_int();
  if (status >= 200 && status < 300) return ExportResult::Ok();
  std::string message = absl::StrCat("OTLP/HTTP ", endpoint_.authority(), endpoint_.path, " answered ", status);
  if (Retryable(status)) {
    std::optional<std::chrono::milliseconds> after;
    const auto it = response.find(http::field::retry_after);
    uint32_t seconds = 0;
    if (it != response.end() && absl::SimpleAtoi(absl::string_view(it->value().data(), it->value().size()), &seconds)) {
      after = std::chrono::seconds(seconds);
    }
    return ExportResult::Retryable(std::move(message), after);
  }
  return ExportResult::Failed(std::move(message));
}

}  // namespace tide::tracing
