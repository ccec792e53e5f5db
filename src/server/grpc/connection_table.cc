#include "server/grpc/connection_table.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace tide::grpc_edge {

void ConnectionTable::Add(uint64_t id, int fd, std::string peer, Clock::time_point now) {
  Remove(id);
  if (!peer.empty()) {
    // A client port is reused only after its previous connection closed: that one is gone.
    if (auto it = by_peer_.find(peer); it != by_peer_.end()) entries_.erase(it->second);
    by_peer_[peer] = id;
  }
  entries_[id] = Entry{.fd = fd, .peer = std::move(peer), .accepted_at = now, .last_active = now};
}

void ConnectionTable::Remove(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  if (!it->second.peer.empty()) {
    auto p = by_peer_.find(it->second.peer);
    if (p != by_peer_.end() && p->second == id) by_peer_.erase(p);
  }
  entries_.erase(it);
}

std::optional<uint64_t> ConnectionTable::FindByPeer(const std::string& peer) const {
  auto it = by_peer_.find(peer);
  if (it == by_peer_.end()) return std::nullopt;
  return it->second;
}

void ConnectionTable::Observe(uint64_t id, const Sample& sample) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  e.bytes_received = std::max(e.bytes_received, sample.bytes_received);
  e.last_active = std::max(e.last_active, sample.last_data);
  e.peer_closed = e.peer_closed || sample.peer_closed;
}

void ConnectionTable::CallStarted(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  ++it->second.calls_in_flight;
  // A call arrived, so the preface did too (the sample may be older than the call).
  it->second.bytes_received = std::max(it->second.bytes_received, kHandshakeBytes);
}

void ConnectionTable::CallFinished(uint64_t id, Clock::time_point now) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  if (it->second.calls_in_flight > 0) --it->second.calls_in_flight;
  it->second.last_active = std::max(it->second.last_active, now);
}

ConnectionPhase ConnectionTable::Phase(const Entry& e) const {
  if (e.calls_in_flight > 0) return ConnectionPhase::kBusy;
  if (e.peer_closed) return ConnectionPhase::kClosing;
  if (e.bytes_received < kHandshakeBytes) return ConnectionPhase::kHandshaking;
  return ConnectionPhase::kIdle;
}

const ConnectionTable::Entry* ConnectionTable::Find(uint64_t id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

std::optional<uint64_t> ConnectionTable::ChooseVictim() const {
  std::optional<uint64_t> best;
  std::tuple<ConnectionPhase, Clock::time_point, uint64_t> best_key{ConnectionPhase::kBusy, {}, 0};
  for (const auto& [id, e] : entries_) {
    const ConnectionPhase phase = Phase(e);
    if (phase == ConnectionPhase::kBusy) continue;
    // Handshaking and closing ones by age; idle ones by how long they have been quiet. The id
    // breaks ties, so the choice does not depend on the map's order.
    const Clock::time_point since = phase == ConnectionPhase::kIdle ? e.last_active : e.accepted_at;
    const auto key = std::make_tuple(phase, since, id);
    if (!best || key < best_key) {
      best = id;
      best_key = key;
    }
  }
  return best;
}

std::vector<uint64_t> ConnectionTable::HandshakeExpired(Clock::time_point now, Clock::duration timeout) const {
  std::vector<uint64_t> expired;
  for (const auto& [id, e] : entries_) {
    const ConnectionPhase phase = Phase(e);
    if ((phase == ConnectionPhase::kHandshaking || phase == ConnectionPhase::kClosing) &&
        now - e.accepted_at >= timeout) {
      expired.push_back(id);
    }
  }
  std::sort(expired.begin(), expired.end());
  return expired;
}

std::vector<std::pair<uint64_t, int>> ConnectionTable::Connections() const {
  std::vector<std::pair<uint64_t, int>> out;
  out.reserve(entries_.size());
  for (const auto& [id, e] : entries_) out.emplace_back(id, e.fd);
  return out;
}

}  // namespace tide::grpc_edge
