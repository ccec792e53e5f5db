#include "server/routes/route_util.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <charconv>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/ascii.h"
#include "common/error.h"
#include "common/error_echo.h"
#include "server/http/error_response.h"

namespace tide::server {

namespace {

std::optional<int64_t> ParseInt(std::string_view text) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

double Ms(serving::Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

http::Response JsonResponse(std::string body, int status) {
  http::Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

http::Response ErrorResponse(const absl::Status& status) { return http::ErrorResponse(status); }

absl::StatusOr<serving::CallInfo> CallInfoFor(const http::Request& request) {
  serving::CallInfo info;
  info.authorization = request.header("authorization");
  info.body_bytes = request.body.size();
  info.received_at = request.received_at;
  info.client_gone = request.client_gone;
  // A rollout's sticky_header (the core asks only for the ones in use); the request outlives Start.
  info.header = [&request](std::string_view name) { return request.header(name); };
  // Cache-Control: no-cache (or no-store) bypasses the score cache for this request.
  if (std::string_view h = request.header("cache-control"); !h.empty()) {
    std::string lower(h);
    for (char& c : lower) c = AsciiToLower(c);
    info.no_cache = lower.find("no-cache") != std::string::npos || lower.find("no-store") != std::string::npos;
  }
  if (std::string_view h = request.header("x-timeout-ms"); !h.empty()) {
    std::optional<int64_t> ms = ParseInt(h);
    if (!ms.has_value()) {
      return errors::MalformedRequest(
          absl::StrCat("x-timeout-ms must be a positive integer, got '", EchoForError(h), "'"));
    }
    info.timeout_us = serving::TimeoutMsToUs(*ms);
  }
  if (std::string_view h = request.header("x-priority"); !h.empty()) {
    info.priority = ParseInt(h);
    if (!info.priority.has_value()) {
      return errors::MalformedRequest(
          absl::StrCat("x-priority must be a non-negative integer, got '", EchoForError(h), "'"));
    }
  }
  return info;
}

void AddTimingHeaders(const serving::StageTimings& t, http::Response* response) {
  auto whole_ms = [](serving::Clock::duration d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  response->headers.emplace_back("x-tokenization-time", whole_ms(t.tokenize));
  response->headers.emplace_back("x-queue-time", whole_ms(t.queue));
  response->headers.emplace_back("x-inference-time", whole_ms(t.inference));
  response->headers.emplace_back("x-total-time", whole_ms(t.total));
  response->headers.emplace_back(
      "Server-Timing", absl::StrFormat("tokenize;dur=%.3f, queue;dur=%.3f, inference;dur=%.3f, postprocess;dur=%.3f, "
                                       "total;dur=%.3f",
                                       Ms(t.tokenize), Ms(t.queue), Ms(t.inference), Ms(t.postprocess), Ms(t.total)));
}

void ResponseSender::SendAnswer(http::Response response, pipeline::Outcome outcome) {
  if (!outcome.status.ok()) return SendFailure(std::move(outcome));
  outcome_ = std::move(outcome);
  if (outcome_.fallback != nullptr) {
    response.headers.emplace_back("x-tide-degraded", outcome_.fallback);
    return Deliver(std::move(response), nullptr);
  }
  const serving::StageTimings* timings = outcome_.Complete(received_at_);
  if (timings != nullptr) AddTimingHeaders(*timings, &response);
  Deliver(std::move(response), timings);
}

void ResponseSender::Send(http::Response response) { Deliver(std::move(response), nullptr); }

void ResponseSender::SendError(const absl::Status& status) {
  outcome_.status = status;
  http::Response response = ErrorResponse(status);
  if (error_renderer_ != nullptr) {
    api::ApiError e = error_renderer_(status);
    response.status = e.http_status;
    response.body = std::move(e.body);
  }
  Deliver(std::move(response), nullptr);
}

void ResponseSender::SendFailure(pipeline::Outcome outcome) {
  if (!outcome.model.empty()) outcome_.set_model(outcome.model, *outcome.version);
  SendError(outcome.status);
}

std::string RequestIdFor(std::string_view header_value) {
  if (!header_value.empty()) return std::string(header_value.substr(0, 128));
  static const uint32_t process = std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  return absl::StrFormat("%08x-%d", process, counter.fetch_add(1, std::memory_order_relaxed) + 1);
}

void ResponseSender::Deliver(http::Response response, const serving::StageTimings* timings) {
  if (!respond_) return;
  if (recorder_ != nullptr) {
    pipeline::Completion c;
    c.protocol = "http";
    c.endpoint = endpoint_;
    c.received_at = received_at_;
    c.outcome = &outcome_;
    c.call = call_.get();
    c.timings = timings;
    c.ok_status = response.status;
    c.request_id = request_id_;
    c.trace = &trace_;
    recorder_->Record(c);
  }
  if (trace_.active()) {
    response.headers.emplace_back("traceparent", trace_.traceparent());
    response.headers.emplace_back("x-trace-id", trace_.trace_id());
  }
  if (outcome_.version.has_value()) response.headers.emplace_back("x-tide-model-version", outcome_.version_label());
  if (!request_id_.empty()) response.headers.emplace_back("x-request-id", request_id_);
  // The permit goes first: a client that reads this response and sends its next request at once
  // must find its slot free (else a sequential client at --max-concurrent-requests 1 gets 429s).
  if (call_ != nullptr) call_->ReleasePermit();
  call_.reset();
  std::move(respond_)(std::move(response));
}

}  // namespace tide::server
