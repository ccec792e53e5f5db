#include "server/http/connection_policy.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tide::http {
namespace {

using std::chrono::milliseconds;

ConnectionLimits Limits() {
  ConnectionLimits limits;
  limits.header_read_timeout = milliseconds(200);
  limits.body_read_timeout = milliseconds(300);
  limits.idle_timeout = milliseconds(5000);
  limits.max_header_bytes = 1024;
  limits.max_body_bytes = 2048;
  return limits;
}

TEST(ConnectionLimitsTest, TakesTheServersOptions) {
  HttpServerOptions options;
  options.header_read_timeout = milliseconds(1);
  options.body_read_timeout = milliseconds(2);
  options.idle_timeout = milliseconds(3);
  options.max_header_bytes = 4;
  options.max_body_bytes = 5;
  const ConnectionLimits limits = ConnectionLimits::Of(options);
  EXPECT_EQ(limits.header_read_timeout, milliseconds(1));
  EXPECT_EQ(limits.body_read_timeout, milliseconds(2));
  EXPECT_EQ(limits.idle_timeout, milliseconds(3));
  EXPECT_EQ(limits.max_header_bytes, 4u);
  EXPECT_EQ(limits.max_body_bytes, 5u);
  EXPECT_EQ(limits.linger_time, kLingerTime);
  EXPECT_EQ(limits.max_pipelined_requests, kMaxPipelinedRequests);
  EXPECT_EQ(limits.paused_read_bytes, kPausedReadBytes);
}

// ---- Deadlines ----------------------------------------------------------------------------------

TEST(ConnectionPolicyTest, TheFirstRequestsHeadersCountFromAcceptLaterOnesFromTheirFirstByte) {
  FakeClock clock;
  const auto accepted = clock.Now();
  ConnectionPolicy policy(Limits(), &clock);
  EXPECT_EQ(policy.accepted_at(), accepted);
  EXPECT_EQ(policy.HandshakeDeadline(), accepted + milliseconds(200));
  clock.Advance(milliseconds(150));  // silent, then the first byte
  EXPECT_EQ(policy.IdleDeadline(), accepted + milliseconds(200));
  EXPECT_EQ(policy.HeaderDeadline(), accepted + milliseconds(200)) << "a slow first byte buys no time";
  clock.Advance(milliseconds(20));
  EXPECT_EQ(policy.BodyDeadline(), clock.Now() + milliseconds(300));
  policy.RequestDispatched();
  EXPECT_EQ(policy.requests_read(), 1u);
  clock.Advance(milliseconds(1000));
  EXPECT_EQ(policy.IdleDeadline(), clock.Now() + milliseconds(5000)) << "between requests: idle_timeout";
  EXPECT_EQ(policy.HeaderDeadline(), clock.Now() + milliseconds(200));
  EXPECT_EQ(policy.HandshakeDeadline(), accepted + milliseconds(200));
}

TEST(ConnectionPolicyTest, WriteAndLingerDeadlinesCountFromNow) {
  FakeClock clock;
  ConnectionPolicy policy(Limits(), &clock);
  clock.Advance(milliseconds(777));
  EXPECT_EQ(policy.WriteDeadline(), clock.Now() + milliseconds(5000));
  EXPECT_EQ(policy.LingerDeadline(), clock.Now() + kLingerTime);
}

TEST(ConnectionPolicyTest, AReadDeadlineMidRequestAnswers408OtherwiseCloses) {
  FakeClock clock;
  ConnectionPolicy policy(Limits(), &clock);
  const std::pair<ConnectionPhase, ReadTimeoutAction> table[] = {
      {ConnectionPhase::kNone, ReadTimeoutAction::kClose},
      {ConnectionPhase::kHandshake, ReadTimeoutAction::kClose},
      {ConnectionPhase::kIdle, ReadTimeoutAction::kClose},
      {ConnectionPhase::kHeader, ReadTimeoutAction::kAnswer408},
      {ConnectionPhase::kBody, ReadTimeoutAction::kAnswer408},
      {ConnectionPhase::kPaused, ReadTimeoutAction::kClose},
      {ConnectionPhase::kLinger, ReadTimeoutAction::kClose},
  };
  for (const auto& [phase, action] : table) {
    policy.set_phase(phase);
    EXPECT_EQ(policy.OnReadTimeout(), action) << static_cast<int>(phase);
  }
}

// ---- Answers to failed reads ------------------------------------------------------------------

struct FailureCase {
  std::string name;
  ConnectionPhase phase;
  ReadFailure failure;
  bool timed_out;
  std::optional<ErrorKind> kind;  // nullopt: close without an answer
  std::string message;
};

TEST(ConnectionPolicyTest, AnswersToFailedReadsTable) {
  const std::vector<FailureCase> cases = {
      {"header timeout", ConnectionPhase::kHeader, ReadFailure::kClosedByPeer, true, ErrorKind::kRequestTimeout,
       "request header not received within 200 ms"},
      {"body timeout", ConnectionPhase::kBody, ReadFailure::kClosedByPeer, true, ErrorKind::kRequestTimeout,
       "request body not received within 300 ms"},
      {"a timeout wins over the limit", ConnectionPhase::kHeader, ReadFailure::kHeaderLimit, true,
       ErrorKind::kRequestTimeout, "request header not received within 200 ms"},
      {"idle timeout: nobody to answer", ConnectionPhase::kIdle, ReadFailure::kClosedByPeer, true, std::nullopt, ""},
      {"header limit", ConnectionPhase::kHeader, ReadFailure::kHeaderLimit, false, ErrorKind::kHeadersTooLarge,
       "request header exceeds 1024 bytes"},
      {"body limit", ConnectionPhase::kBody, ReadFailure::kBodyLimit, false, ErrorKind::kPayloadTooLarge,
       "request body exceeds 2048 bytes"},
      {"malformed", ConnectionPhase::kHeader, ReadFailure::kMalformed, false, ErrorKind::kMalformedRequest,
       "malformed HTTP request: bad field"},
      {"peer closed in the headers", ConnectionPhase::kHeader, ReadFailure::kClosedByPeer, false, std::nullopt, ""},
      {"peer closed in the body", ConnectionPhase::kBody, ReadFailure::kClosedByPeer, false, std::nullopt, ""},
  };
  FakeClock clock;
  ConnectionPolicy policy(Limits(), &clock);
  for (const FailureCase& c : cases) {
    SCOPED_TRACE(c.name);
    policy.set_phase(c.phase);
    const std::optional<ServerAnswer> answer = policy.AnswerReadFailure(c.failure, c.timed_out, "bad field");
    ASSERT_EQ(answer.has_value(), c.kind.has_value());
    if (!answer) continue;
    EXPECT_EQ(answer->kind, *c.kind);
    EXPECT_EQ(answer->message, c.message);
  }
}

// ---- Pipelining -------------------------------------------------------------------------------

TEST(ConnectionPolicyTest, ParsingPausesAtThePipeliningLimitAndReadsAheadABoundedAmount) {
  FakeClock clock;
  ConnectionPolicy policy(Limits(), &clock);
  EXPECT_TRUE(policy.MayParse(0));
  EXPECT_TRUE(policy.MayParse(kMaxPipelinedRequests - 1));
  EXPECT_FALSE(policy.MayParse(kMaxPipelinedRequests));
  EXPECT_FALSE(policy.MayParse(kMaxPipelinedRequests + 1));
  EXPECT_EQ(policy.ReadAheadBytes(0), kReadChunk);
  EXPECT_EQ(policy.ReadAheadBytes(kPausedReadBytes - kReadChunk), kReadChunk);
  EXPECT_EQ(policy.ReadAheadBytes(kPausedReadBytes - 100), 100u);
  EXPECT_EQ(policy.ReadAheadBytes(kPausedReadBytes), 0u);
  EXPECT_EQ(policy.ReadAheadBytes(kPausedReadBytes + 5), 0u);
}

// ---- Eviction -----------------------------------------------------------------------------------

TEST(ConnectionPolicyTest, TierTable) {
  struct TierCase {
    ConnectionPhase phase;
    bool closed;
    size_t open_responses;
    bool writing;
    EvictionTier tier;
  };
  const TierCase cases[] = {
      {ConnectionPhase::kNone, false, 0, false, EvictionTier::kIdle},       // accepted, nothing read
      {ConnectionPhase::kHandshake, false, 0, false, EvictionTier::kIdle},  // TLS handshake
      {ConnectionPhase::kIdle, false, 0, false, EvictionTier::kIdle},       // between requests
      {ConnectionPhase::kHeader, false, 0, false, EvictionTier::kHeader},
      {ConnectionPhase::kBody, false, 0, false, EvictionTier::kBody},
      {ConnectionPhase::kIdle, false, 1, false, EvictionTier::kBusy},       // a request in flight
      {ConnectionPhase::kHeader, false, 1, false, EvictionTier::kBusy},     // pipelining behind it
      {ConnectionPhase::kIdle, false, 0, true, EvictionTier::kBusy},        // a response being written
      {ConnectionPhase::kPaused, false, kMaxPipelinedRequests, false, EvictionTier::kBusy},
      {ConnectionPhase::kLinger, false, 0, false, EvictionTier::kIdle},     // after the last response
      {ConnectionPhase::kLinger, false, 0, true, EvictionTier::kIdle},
      {ConnectionPhase::kHeader, true, 3, true, EvictionTier::kClosed},
  };
  FakeClock clock;
  ConnectionPolicy policy(Limits(), &clock);
  for (const TierCase& c : cases) {
    policy.set_phase(c.phase);
    EXPECT_EQ(policy.Tier(c.closed, c.open_responses, c.writing), c.tier)
        << static_cast<int>(c.phase) << " closed=" << c.closed << " open=" << c.open_responses << " writing=" << c.writing;
  }
  EXPECT_TRUE(ConnectionPolicy::GivesWay(EvictionTier::kIdle));
  EXPECT_TRUE(ConnectionPolicy::GivesWay(EvictionTier::kBody));
  EXPECT_FALSE(ConnectionPolicy::GivesWay(EvictionTier::kBusy));
  EXPECT_FALSE(ConnectionPolicy::GivesWay(EvictionTier::kClosed));
}

TEST(ConnectionPolicyTest, TierSinceMovesOnlyWhenTheTierChanges) {
  FakeClock clock;
  const auto accepted = clock.Now();
  ConnectionPolicy policy(Limits(), &clock);
  EXPECT_EQ(policy.tier(), EvictionTier::kIdle);
  EXPECT_EQ(policy.tier_since(), accepted);
  clock.Advance(milliseconds(10));
  EXPECT_FALSE(policy.UpdateTier(EvictionTier::kIdle));
  EXPECT_EQ(policy.tier_since(), accepted) << "idle since accept, not since the last look";
  EXPECT_TRUE(policy.UpdateTier(EvictionTier::kHeader));
  EXPECT_EQ(policy.tier_since(), accepted + milliseconds(10));
  clock.Advance(milliseconds(10));
  EXPECT_FALSE(policy.UpdateTier(EvictionTier::kHeader));
  EXPECT_EQ(policy.tier_since(), accepted + milliseconds(10));
}

struct ChooserCase {
  std::string name;
  std::vector<EvictionCandidate> open;
  std::optional<size_t> victim;  // nullopt: refused
};

std::optional<size_t> Choose(const std::vector<EvictionCandidate>& open) {
  EvictionChooser chooser;
  std::optional<size_t> chosen;
  for (size_t i = 0; i < open.size(); ++i) {
    if (chooser.Offer(open[i])) chosen = i;
  }
  EXPECT_EQ(chooser.found(), chosen.has_value());
  return chosen;
}

TEST(EvictionChooserTest, RankingTable) {
  const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);
  const auto at = [&](int ms) { return t0 + milliseconds(ms); };
  using T = EvictionTier;
  const std::vector<ChooserCase> cases = {
      {"none open", {}, std::nullopt},
      {"idle the longest", {{T::kIdle, at(20), false}, {T::kIdle, at(10), false}, {T::kIdle, at(30), false}}, 1},
      {"idle before reading headers", {{T::kHeader, at(0), false}, {T::kIdle, at(50), false}}, 1},
      {"headers before a body", {{T::kBody, at(0), false}, {T::kHeader, at(50), false}}, 1},
      {"the oldest header reader", {{T::kHeader, at(20), false}, {T::kHeader, at(10), false}, {T::kBusy, at(0), false}}, 1},
      {"a body reader over busy ones", {{T::kBusy, at(0), false}, {T::kBody, at(90), false}}, 1},
      {"every one busy: refused", {{T::kBusy, at(0), false}, {T::kBusy, at(1), false}}, std::nullopt},
      {"closed never", {{T::kClosed, at(0), false}}, std::nullopt},
      {"one already being evicted is not chosen twice", {{T::kIdle, at(0), true}, {T::kBody, at(5), false}}, 1},
      {"only evicting ones: refused", {{T::kIdle, at(0), true}}, std::nullopt},
      {"a tie goes to the first", {{T::kIdle, at(5), false}, {T::kIdle, at(5), false}}, 0},
  };
  for (const ChooserCase& c : cases) EXPECT_EQ(Choose(c.open), c.victim) << c.name;
}

// The eviction order of connections driven through their phases on one fake clock: the accept
// loop's view (published tier and tier_since) of three connections at the cap.
TEST(EvictionChooserTest, ConnectionsDrivenThroughTheirPhasesRankAsTheContractSays) {
  FakeClock clock;
  const ConnectionLimits limits = Limits();
  ConnectionPolicy busy(limits, &clock);
  ConnectionPolicy older(limits, &clock);
  clock.Advance(milliseconds(5));
  ConnectionPolicy newer(limits, &clock);
  const auto view = [](ConnectionPolicy& policy, size_t open_responses) {
    policy.UpdateTier(policy.Tier(false, open_responses, false));
    return EvictionCandidate{policy.tier(), policy.tier_since(), false};
  };
  // `busy` has a request in flight; the two others never sent a byte: idle since accept.
  busy.set_phase(ConnectionPhase::kIdle);
  older.set_phase(ConnectionPhase::kIdle);
  newer.set_phase(ConnectionPhase::kIdle);
  EXPECT_EQ(Choose({view(busy, 1), view(older, 0), view(newer, 0)}), 1u);
  // Both start their headers, `older` first: still `older` (reading headers the longest).
  clock.Advance(milliseconds(5));
  older.set_phase(ConnectionPhase::kHeader);
  clock.Advance(milliseconds(5));
  newer.set_phase(ConnectionPhase::kHeader);
  EXPECT_EQ(Choose({view(busy, 1), view(older, 0), view(newer, 0)}), 1u);
  // `newer` finishes its request and waits for the next: now it is the idle one.
  newer.RequestDispatched();
  newer.set_phase(ConnectionPhase::kIdle);
  EXPECT_EQ(Choose({view(busy, 1), view(older, 0), view(newer, 0)}), 2u);
  // `older` reads a body and `newer` gets a request in flight: `older` is the only one to go.
  older.set_phase(ConnectionPhase::kBody);
  EXPECT_EQ(Choose({view(busy, 1), view(older, 0), view(newer, 1)}), 1u);
  // Every one busy: refused.
  EXPECT_EQ(Choose({view(busy, 1), view(older, 1), view(newer, 1)}), std::nullopt);
}

TEST(EvictionChooserTest, TheCapCountsOpenConnections) {
  EXPECT_FALSE(AtConnectionCap(0, 1));
  EXPECT_TRUE(AtConnectionCap(1, 1));
  EXPECT_FALSE(AtConnectionCap(1023, 1024));
  EXPECT_TRUE(AtConnectionCap(1024, 1024));
  EXPECT_TRUE(AtConnectionCap(1025, 1024));  // over by one while an evicted connection closes
}

}  // namespace
}  // namespace tide::http
