// tide::serving::LivePreemption — the signal from one model version's live submit path to the
// shadow lane whose running batch must give the CPU back (serving/shadow_lane.h).
//
// Contract:
//  - LiveRowsQueued() is called by ServedModel::Submit after it queued live rows, on the caller's
//    thread. It is lock-free and never waits: without an attached lane it is one atomic load;
//    with one, it calls that lane backend's RunTerminator::Terminate (an atomic store) between
//    two atomic increments of a user count.
//  - Attach(terminator) makes LiveRowsQueued stop `terminator`'s Run from now on (it replaces a
//    terminator attached earlier); Detach(terminator) stops that (a no-op when another one was
//    attached since) and returns once no LiveRowsQueued still uses it: after Detach the
//    terminator may be destroyed. Attach and Detach belong to the lane (its own thread); Detach
//    waits only for live threads inside LiveRowsQueued, which never wait for anything.
//  - Thread-safe; not copyable. Owned by the ServedModel it belongs to.
#pragma once

#include <atomic>
#include <thread>

#include "runtime/model_backend.h"

namespace tide::serving {

class LivePreemption {
 public:
  LivePreemption() = default;
  LivePreemption(const LivePreemption&) = delete;
  LivePreemption& operator=(const LivePreemption&) = delete;

  void LiveRowsQueued() noexcept {
    if (target_.load(std::memory_order_acquire) == nullptr) return;  // no shadow lane: one load
    users_.fetch_add(1, std::memory_order_seq_cst);
    if (runtime::RunTerminator* t = target_.load(std::memory_order_seq_cst); t != nullptr) {
      t->Terminate();
    }
    users_.fetch_sub(1, std::memory_order_seq_cst);
  }

  void Attach(runtime::RunTerminator* terminator) noexcept {
    target_.store(terminator, std::memory_order_seq_cst);
  }

  void Detach(runtime::RunTerminator* terminator) noexcept {
    runtime::RunTerminator* expected = terminator;
    target_.compare_exchange_strong(expected, nullptr, std::memory_order_seq_cst);
    // A live thread that read `terminator` before the exchange is counted in users_ (it counted
    // itself before reading): wait for it to leave. It never waits, so this is short.
    while (users_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  }

 private:
  std::atomic<runtime::RunTerminator*> target_{nullptr};
  std::atomic<int> users_{0};
};

}  // namespace tide::serving
