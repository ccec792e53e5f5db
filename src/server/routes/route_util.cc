#include "server/routes/route_util.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/status_http.h"
#include "common/error_echo.h"
#include "guard/api_key.h"
#include "serving/scoring.h"

namespace tide::server {

namespace {

std::optional<int64_t> ParseInt(std::string_view text) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

// The longest timeout in microseconds whose nanoseconds still fit the steady clock's int64 (about
// 292 years); longer values saturate to it.
constexpr int64_t kMaxTimeoutUs = std::numeric_limits<int64_t>::max() / 1000;

int64_t SaturatingMsToUs(int64_t ms) { return ms > kMaxTimeoutUs / 1000 ? kMaxTimeoutUs : ms * 1000; }

// start + us, or time_point::max() (no deadline) when that is past what the clock can represent.
serving::Clock::time_point DeadlineAfter(serving::Clock::time_point start, int64_t us) {
  const serving::Clock::duration headroom = serving::Clock::time_point::max() - start;
  const std::chrono::microseconds timeout(us);  // us <= kMaxTimeoutUs: its nanoseconds fit
  if (timeout >= headroom) return serving::Clock::time_point::max();
  return start + timeout;
}

double Ms(serving::Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

http::Response ErrorResponse(const absl::Status& status) {
  http::Response r;
  r.status = api::HttpStatusFor(status.code());
  r.body = api::ErrorBody(status);
  if (r.status == 503 || r.status == 429) r.headers.emplace_back("Retry-After", "1");
  if (serving::IsDegradedUnavailable(status)) r.headers.emplace_back("x-tide-degraded", "unavailable");
  return r;
}

absl::StatusOr<serving::RowTask::Admission> MakeAdmission(const http::Request& request,
                                                          std::chrono::milliseconds default_timeout,
                                                          std::optional<int64_t> timeout_us,
                                                          std::optional<int64_t> priority) {
  serving::RowTask::Admission a;
  a.client_gone = request.client_gone;
  // Microseconds, saturating (a 64-bit millisecond or microsecond count overflows nanoseconds).
  int64_t timeout = default_timeout.count() > 0 ? SaturatingMsToUs(default_timeout.count()) : 0;
  if (std::string_view h = request.header("x-timeout-ms"); !h.empty()) {
    std::optional<int64_t> ms = ParseInt(h);
    if (!ms || *ms <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("x-timeout-ms must be a positive integer, got '", EchoForError(h), "'"));
    }
    timeout_us = SaturatingMsToUs(*ms);
  }
  if (timeout_us.has_value()) {
    if (*timeout_us <= 0) return absl::FailedPreconditionError("timeout must be positive");
    const int64_t own = std::min(*timeout_us, kMaxTimeoutUs);
    if (timeout == 0 || own < timeout) timeout = own;
  }
  if (timeout > 0) a.deadline = DeadlineAfter(request.received_at, timeout);
  if (std::string_view h = request.header("x-priority"); !h.empty()) {
    priority = ParseInt(h);
    if (!priority || *priority < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("x-priority must be a non-negative integer, got '", EchoForError(h), "'"));
    }
  }
  if (priority.has_value()) a.priority = static_cast<int>(*priority);
  return a;
}

bool CheckApiKey(const http::Request& request, std::string_view api_key, ResponseSender* sender) {
  if (api_key.empty() || guard::ApiKeyMatches(request.header("authorization"), api_key)) return true;
  http::Response r = ErrorResponse(absl::UnauthenticatedError("missing or invalid API key (Authorization: Bearer <key>)"));
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  sender->Send(std::move(r));
  return false;
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

void ResponseSender::Send(http::Response response, const serving::StageTimings* timings) {
  if (!respond_) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - received_at_).count();
  if (metrics_ != nullptr) {
    metrics_->requests->WithLabels({model_, version_, endpoint_, std::to_string(response.status)})->Increment();
    metrics_->request_duration->WithLabels({model_, version_, endpoint_})->Observe(seconds);
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
  // The permit goes first: a client that reads this response and sends its next request at once
  // must find its slot free (else a sequential client at --max-concurrent-requests 1 gets 429s).
  permit_.reset();
  std::move(respond_)(std::move(response));
}

}  // namespace tide::server
