// tide::CancellationFlag — a one-way "stop caring about this request" signal.
//
// Contract: shared (std::shared_ptr) between the party that raises it (the HTTP server when the
// client disconnects) and those that poll it (batcher, workers). Thread-safe, lock-free, never
// blocks. Once cancelled it stays cancelled.
#pragma once

#include <atomic>

namespace tide {

class CancellationFlag {
 public:
  void Cancel() { cancelled_.store(true, std::memory_order_release); }
  bool IsCancelled() const { return cancelled_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> cancelled_{false};
};

}  // namespace tide
