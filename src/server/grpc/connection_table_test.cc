// ConnectionTable: which gRPC connection gives way at the cap, and the handshake timeout, with
// made-up times and socket samples (no sockets, no clock).
#include "server/grpc/connection_table.h"

#include "gtest/gtest.h"

namespace tide::grpc_edge {
namespace {

using Clock = ConnectionTable::Clock;
using std::chrono::milliseconds;

const Clock::time_point kT0 = Clock::time_point() + std::chrono::hours(1);

ConnectionTable::Sample Spoke(uint64_t bytes, Clock::time_point last_data) {
  return ConnectionTable::Sample{.bytes_received = bytes, .last_data = last_data};
}

TEST(ConnectionTable, HandshakingGiveWayOldestFirstBeforeIdle) {
  ConnectionTable t;
  t.Add(1, 10, "", kT0);                      // gRPC client, idle since kT0 + 1 ms
  t.Add(2, 11, "", kT0 + milliseconds(5));    // silent
  t.Add(3, 12, "", kT0 + milliseconds(2));    // silent, older than 2
  t.Add(4, 13, "", kT0 + milliseconds(3));    // sent 10 bytes: still not the preface
  t.Observe(1, Spoke(200, kT0 + milliseconds(1)));
  t.Observe(4, Spoke(10, kT0 + milliseconds(3)));
  EXPECT_EQ(t.Phase(*t.Find(1)), ConnectionPhase::kIdle);
  EXPECT_EQ(t.Phase(*t.Find(4)), ConnectionPhase::kHandshaking);
  EXPECT_EQ(t.ChooseVictim(), 3u);
  t.Remove(3);
  EXPECT_EQ(t.ChooseVictim(), 4u);
  t.Remove(4);
  EXPECT_EQ(t.ChooseVictim(), 2u);
  t.Remove(2);
  EXPECT_EQ(t.ChooseVictim(), 1u);  // only then the idle client
}

TEST(ConnectionTable, ExactlyThePrefaceEndsTheHandshake) {
  ConnectionTable t;
  t.Add(1, 10, "", kT0);
  t.Observe(1, Spoke(ConnectionTable::kHandshakeBytes - 1, kT0));
  EXPECT_EQ(t.Phase(*t.Find(1)), ConnectionPhase::kHandshaking);
  t.Observe(1, Spoke(ConnectionTable::kHandshakeBytes, kT0));
  EXPECT_EQ(t.Phase(*t.Find(1)), ConnectionPhase::kIdle);
}

TEST(ConnectionTable, IdleOnesGiveWayByLastActivityAndBusyOnesNever) {
  ConnectionTable t;
  t.Add(1, 10, "", kT0);
  t.Add(2, 11, "", kT0);
  t.Add(3, 12, "", kT0);
  t.Observe(1, Spoke(500, kT0 + milliseconds(30)));
  t.Observe(2, Spoke(500, kT0 + milliseconds(10)));  // quiet the longest
  t.Observe(3, Spoke(500, kT0 + milliseconds(20)));
  EXPECT_EQ(t.ChooseVictim(), 2u);
  t.CallStarted(2);
  EXPECT_EQ(t.Phase(*t.Find(2)), ConnectionPhase::kBusy);
  EXPECT_EQ(t.ChooseVictim(), 3u);
  t.CallStarted(1);
  t.CallStarted(3);
  EXPECT_EQ(t.ChooseVictim(), std::nullopt);  // every connection has a call in flight: refuse
  // The end of a call is activity: 3 ends last, so 2 (ended earlier) gives way first.
  t.CallFinished(2, kT0 + milliseconds(100));
  t.CallFinished(3, kT0 + milliseconds(200));
  EXPECT_EQ(t.ChooseVictim(), 2u);
  // An older sample does not move the activity back.
  t.Observe(3, Spoke(500, kT0 + milliseconds(50)));
  EXPECT_EQ(t.Find(3)->last_active, kT0 + milliseconds(200));
}

TEST(ConnectionTable, TwoCallsKeepAConnectionBusyUntilBothEnd) {
  ConnectionTable t;
  t.Add(1, 10, "", kT0);
  t.CallStarted(1);
  t.CallStarted(1);
  EXPECT_EQ(t.Phase(*t.Find(1)), ConnectionPhase::kBusy);  // a call implies the preface came
  t.CallFinished(1, kT0);
  EXPECT_EQ(t.ChooseVictim(), std::nullopt);
  t.CallFinished(1, kT0);
  EXPECT_EQ(t.ChooseVictim(), 1u);
  t.CallFinished(1, kT0);  // an extra end does not go below zero
  t.CallStarted(1);
  EXPECT_EQ(t.ChooseVictim(), std::nullopt);
}

TEST(ConnectionTable, PeerClosedGivesWayFirst) {
  ConnectionTable t;
  t.Add(1, 10, "", kT0);                    // silent
  t.Add(2, 11, "", kT0 + milliseconds(9));  // a client that left
  t.Observe(2, ConnectionTable::Sample{.bytes_received = 300, .last_data = kT0, .peer_closed = true});
  EXPECT_EQ(t.Phase(*t.Find(2)), ConnectionPhase::kClosing);
  EXPECT_EQ(t.ChooseVictim(), 2u);
}

TEST(ConnectionTable, HandshakeTimeoutCountsFromAcceptAndSparesClients) {
  ConnectionTable t;
  t.Add(1, 10, "", kT0);
  t.Add(2, 11, "", kT0 + milliseconds(400));
  t.Add(3, 12, "", kT0);
  t.Observe(3, Spoke(24, kT0 + milliseconds(1)));  // spoke: never timed out by the handshake rule
  const milliseconds timeout(1000);
  EXPECT_TRUE(t.HandshakeExpired(kT0 + milliseconds(999), timeout).empty());
  EXPECT_EQ(t.HandshakeExpired(kT0 + milliseconds(1000), timeout), (std::vector<uint64_t>{1}));
  EXPECT_EQ(t.HandshakeExpired(kT0 + milliseconds(5000), timeout), (std::vector<uint64_t>{1, 2}));
  // A call in flight spares a connection even if no sample has seen its bytes yet.
  t.CallStarted(2);
  EXPECT_EQ(t.HandshakeExpired(kT0 + milliseconds(5000), timeout), (std::vector<uint64_t>{1}));
}

TEST(ConnectionTable, UnknownIdsAreIgnored) {
  ConnectionTable t;
  t.Observe(7, Spoke(100, kT0));
  t.CallStarted(7);
  t.CallFinished(7, kT0);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.ChooseVictim(), std::nullopt);
  t.Add(7, 3, "", kT0);
  t.Remove(7);
  t.Remove(7);
  EXPECT_FALSE(t.Contains(7));
}

TEST(ConnectionTable, FindsConnectionsByPeer) {
  ConnectionTable t;
  t.Add(1, 10, "127.0.0.1:5000", kT0);
  t.Add(2, 11, "::1:5000", kT0);
  t.Add(3, 12, "", kT0);
  EXPECT_EQ(t.FindByPeer("127.0.0.1:5000"), 1u);
  EXPECT_EQ(t.FindByPeer("::1:5000"), 2u);
  EXPECT_EQ(t.FindByPeer(""), std::nullopt);
  EXPECT_EQ(t.FindByPeer("127.0.0.1:5001"), std::nullopt);
  // The same client port again: its earlier connection is over.
  t.Add(4, 13, "127.0.0.1:5000", kT0);
  EXPECT_EQ(t.FindByPeer("127.0.0.1:5000"), 4u);
  EXPECT_FALSE(t.Contains(1));
  t.Remove(4);
  EXPECT_EQ(t.FindByPeer("127.0.0.1:5000"), std::nullopt);
  EXPECT_EQ(t.size(), 2u);
}

}  // namespace
}  // namespace tide::grpc_edge
