#include "server/routes/route_util.h"

#include <charconv>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/status_http.h"

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

http::Response ErrorResponse(const absl::Status& status) {
  http::Response r;
  r.status = api::HttpStatusFor(status.code());
  r.body = api::ErrorBody(status);
  if (r.status == 503 || r.status == 429) r.headers.emplace_back("Retry-After", "1");
  return r;
}

absl::StatusOr<serving::RowTask::Admission> MakeAdmission(const http::Request& request,
                                                          std::chrono::milliseconds default_timeout,
                                                          std::optional<int64_t> timeout_us,
                                                          std::optional<int64_t> priority) {
  serving::RowTask::Admission a;
  a.client_gone = request.client_gone;
  std::chrono::microseconds timeout = default_timeout;
  if (std::string_view h = request.header("x-timeout-ms"); !h.empty()) {
    std::optional<int64_t> ms = ParseInt(h);
    if (!ms || *ms <= 0) return absl::InvalidArgumentError(absl::StrCat("x-timeout-ms must be a positive integer, got '", std::string(h), "'"));
    timeout_us = *ms * 1000;
  }
  if (timeout_us.has_value()) {
    if (*timeout_us <= 0) return absl::FailedPreconditionError("timeout must be positive");
    const std::chrono::microseconds own(*timeout_us);
    if (timeout.count() == 0 || own < timeout) timeout = own;
  }
  if (timeout.count() > 0) a.deadline = request.received_at + timeout;
  if (std::string_view h = request.header("x-priority"); !h.empty()) {
    priority = ParseInt(h);
    if (!priority || *priority < 0) {
      return absl::InvalidArgumentError(absl::StrCat("x-priority must be a non-negative integer, got '", std::string(h), "'"));
    }
  }
  if (priority.has_value()) a.priority = static_cast<int>(*priority);
  return a;
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
