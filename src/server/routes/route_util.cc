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

void ResponseSender::SendAnswer(http::Response response, serving::StageTimings timings,
                                std::chrono::steady_clock::time_point post, const char* fallback) {
  if (fallback != nullptr) {
    response.headers.emplace_back("x-tide-degraded", fallback);
    return Send(std::move(response));
  }
  const auto now = std::chrono::steady_clock::now();
  timings.postprocess = now - post;
  timings.total = now - received_at_;
  AddTimingHeaders(timings, &response);
  Send(std::move(response), &timings);
}

void ResponseSender::SendError(const absl::Status& status) {
  if (access_log_ != nullptr && call_ == nullptr) refused_key_ = KeyNameOf(status);
  Send(ErrorResponse(status));
}

std::string RequestIdFor(std::string_view header_value) {
  if (!header_value.empty()) return std::string(header_value.substr(0, 128));
  static const uint32_t process = std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  return absl::StrFormat("%08x-%d", process, counter.fetch_add(1, std::memory_order_relaxed) + 1);
}

namespace {

// The error_type of an error body ({"error": ..., "error_type": "..."}, ErrorResponse's); "" when
// none. A plain search: only error answers get here, and their bodies are short.
std::string ErrorTypeOfBody(const std::string& body) {
  static constexpr std::string_view kField = "\"error_type\":\"";
  const size_t at = body.find(kField);
  if (at == std::string::npos) return {};
  const size_t begin = at + kField.size();
  const size_t end = body.find('"', begin);
  return end == std::string::npos ? std::string() : body.substr(begin, std::min<size_t>(end - begin, 64));
}

}  // namespace

void ResponseSender::Log(const http::Response& response, double seconds, const serving::StageTimings* timings) {
  serving::AccessRecord r;
  r.time = std::chrono::system_clock::now();
  r.protocol = "http";
  r.route = endpoint_;
  r.model = model_;
  r.version = version_;
  r.status = response.status;
  if (response.status >= 400) r.error_type = ErrorTypeOfBody(response.body);
  if (call_ != nullptr) {
    if (call_->tenant() != nullptr) r.key = call_->tenant()->name();
    r.pairs = call_->pairs();
    r.cache_hits = call_->cache_hits();
  } else {
    r.key = refused_key_;
  }
  for (const auto& [name, value] : response.headers) {
    if (name == "x-tide-degraded") r.degraded = true;
  }
  if (timings != nullptr) {
    r.queue_ms = std::chrono::duration<double, std::milli>(timings->queue).count();
    r.inference_ms = std::chrono::duration<double, std::milli>(timings->inference).count();
  }
  r.total_ms = seconds * 1000;
  r.request_id = request_id_;
  access_log_->Log(std::move(r));
}

void ResponseSender::Send(http::Response response, const serving::StageTimings* timings) {
  if (!respond_) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - received_at_).count();
  if (metrics_ != nullptr) {
    metrics_->requests->WithLabels({model_, version_, endpoint_, std::to_string(response.status), "http"})->Increment();
    metrics_->request_duration->WithLabels({model_, version_, endpoint_, "http"})->Observe(seconds);
    if (timings != nullptr) {
      auto observe = [&](const char* stage, serving::Clock::duration d) {
        metrics_->stage_duration->WithLabels({model_, version_, stage})->Observe(std::chrono::duration<double>(d).count());
      };
      observe("tokenize", timings->tokenize);
      observe("queue", timings->queue);
      observe("inference", timings->inference);
      observe("postprocess", timings->postprocess);
    }
  }
  if (!version_.empty()) response.headers.emplace_back("x-tide-model-version", version_);
  if (access_log_ != nullptr) {
    Log(response, seconds, timings);
    response.headers.emplace_back("x-request-id", request_id_);
  }
  // The permit goes first: a client that reads this response and sends its next request at once
  // must find its slot free (else a sequential client at --max-concurrent-requests 1 gets 429s).
  if (call_ != nullptr) call_->ReleasePermit();
  call_.reset();
  std::move(respond_)(std::move(response));
}

}  // namespace tide::server
