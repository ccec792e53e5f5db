#include "server/http/connection_policy.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tide::http {

ConnectionLimits ConnectionLimits::Of(const HttpServerOptions& options) {
  ConnectionLimits limits;
  limits.header_read_timeout = options.header_read_timeout;
  limits.body_read_timeout = options.body_read_timeout;
  limits.idle_timeout = options.idle_timeout;
  limits.max_header_bytes = options.max_header_bytes;
  limits.max_body_bytes = options.max_body_bytes;
  return limits;
}

ConnectionPolicy::ConnectionPolicy(const ConnectionLimits& limits, const Clock* clock)
    : limits_(limits), clock_(clock), accepted_at_(clock->Now()), tier_since_(accepted_at_) {}

ConnectionPolicy::time_point ConnectionPolicy::HandshakeDeadline() const {
  return accepted_at_ + limits_.header_read_timeout;
}

ConnectionPolicy::time_point ConnectionPolicy::IdleDeadline() const {
  if (requests_read_ == 0) return accepted_at_ + limits_.header_read_timeout;
  return clock_->Now() + limits_.idle_timeout;
}

ConnectionPolicy::time_point ConnectionPolicy::HeaderDeadline() const {
  return (requests_read_ == 0 ? accepted_at_ : clock_->Now()) + limits_.header_read_timeout;
}

ConnectionPolicy::time_point ConnectionPolicy::BodyDeadline() const {
  return clock_->Now() + limits_.body_read_timeout;
}

ConnectionPolicy::time_point ConnectionPolicy::LingerDeadline() const { return clock_->Now() + limits_.linger_time; }

ConnectionPolicy::time_point ConnectionPolicy::WriteDeadline() const { return clock_->Now() + limits_.idle_timeout; }

ReadTimeoutAction ConnectionPolicy::OnReadTimeout() const {
  return phase_ == ConnectionPhase::kHeader || phase_ == ConnectionPhase::kBody ? ReadTimeoutAction::kAnswer408
                                                                               : ReadTimeoutAction::kClose;
}

std::optional<ServerAnswer> ConnectionPolicy::AnswerReadFailure(ReadFailure failure, bool timed_out,
                                                                std::string_view detail) const {
  if (timed_out && (phase_ == ConnectionPhase::kHeader || phase_ == ConnectionPhase::kBody)) {
    const bool header = phase_ == ConnectionPhase::kHeader;
    return ServerAnswer{ErrorKind::kRequestTimeout,
                        absl::StrCat("request ", header ? "header" : "body", " not received within ",
                                     (header ? limits_.header_read_timeout : limits_.body_read_timeout).count(),
                                     " ms")};
  }
  switch (failure) {
    case ReadFailure::kHeaderLimit:
      return ServerAnswer{ErrorKind::kHeadersTooLarge,
                          absl::StrCat("request header exceeds ", limits_.max_header_bytes, " bytes")};
    case ReadFailure::kBodyLimit:
      return ServerAnswer{ErrorKind::kPayloadTooLarge,
                          absl::StrCat("request body exceeds ", limits_.max_body_bytes, " bytes")};
    case ReadFailure::kMalformed:
      return ServerAnswer{ErrorKind::kMalformedRequest, absl::StrCat("malformed HTTP request: ", std::string(detail))};
    case ReadFailure::kClosedByPeer:
      break;
  }
  return std::nullopt;
}

size_t ConnectionPolicy::ReadAheadBytes(size_t buffered) const {
  if (buffered >= limits_.paused_read_bytes) return 0;
  return std::min(kReadChunk, limits_.paused_read_bytes - buffered);
}

EvictionTier ConnectionPolicy::Tier(bool closed, size_t open_responses, bool writing) const {
  if (closed) return EvictionTier::kClosed;
  if (phase_ == ConnectionPhase::kLinger) return EvictionTier::kIdle;
  if (open_responses > 0 || writing) return EvictionTier::kBusy;
  if (phase_ == ConnectionPhase::kHeader) return EvictionTier::kHeader;
  if (phase_ == ConnectionPhase::kBody) return EvictionTier::kBody;
  return EvictionTier::kIdle;
}

bool ConnectionPolicy::UpdateTier(EvictionTier tier) {
  if (tier == tier_) return false;
  tier_ = tier;
  tier_since_ = clock_->Now();
  return true;
}

bool EvictionChooser::Offer(const EvictionCandidate& candidate) {
  if (candidate.tier >= EvictionTier::kBusy || candidate.evicting) return false;
  if (found_ && std::pair(candidate.tier, candidate.tier_since) >= std::pair(best_.tier, best_.tier_since)) {
    return false;
  }
  found_ = true;
  best_ = candidate;
  return true;
}

}  // namespace tide::http
