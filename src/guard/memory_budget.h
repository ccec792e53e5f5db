// tide::guard::MemoryBudget — admission by estimated bytes: a server-wide cap on the memory that
// requests being parsed, tokenized and scored may hold at once (`--max-inflight-bytes`). The edge
// estimates what a request will cost from its body size (EstimateRequestBytes) before parsing it,
// answers 413 when the estimate alone exceeds the capacity (Fits() false) and 429 + Retry-After at
// once when the budget is full (TryAcquire() empty), so a burst of heavy requests is refused in
// constant time instead of being materialised.
//
// Contract:
//  - Thread-safe and lock-free: TryAcquire() is a compare-and-swap loop on one atomic counter; it
//    never blocks and never allocates. It fails only when the bytes really held plus the request's
//    would exceed the capacity.
//  - A Lease is move-only and gives its bytes back when destroyed (RAII); hold it until the
//    request's response is sent (the parsed request, its rows and its result live that long).
//  - capacity_bytes <= 0 means no limit (leases are still counted for in_flight_bytes()).
//  - on_drained (optional) runs on the releasing thread, outside any lock, at most once per
//    excursion: after in-flight bytes reached trim_above_bytes, the first release that brings them
//    to trim_below_bytes or less calls it (the server returns freed heap to the OS there). It must
//    not block for long and must not acquire from this budget.
//  - The budget must outlive every lease it handed out.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>

namespace tide::guard {

// What a request of `body_bytes` may cost while it is parsed, tokenized and scored: the body
// itself, its JSON DOM, the parsed copy of its texts/tensors and the rows. `factor` is the worst
// case measured per body byte (bench/memory/factor.sh); `fixed_bytes` covers a small request's
// tokenized rows, which do not scale with its body.
inline int64_t EstimateRequestBytes(size_t body_bytes, int64_t factor, int64_t fixed_bytes) {
  return static_cast<int64_t>(body_bytes) * std::max<int64_t>(factor, 1) + std::max<int64_t>(fixed_bytes, 0);
}

class MemoryBudget {
 public:
  struct Options {
    // Bytes all admitted requests may hold together; <= 0: unlimited.
    int64_t capacity_bytes = int64_t{1} << 30;
    // on_drained arms when in-flight bytes reach trim_above_bytes (<= 0: never) and fires when
    // they fall back to trim_below_bytes.
    int64_t trim_above_bytes = 0;
    int64_t trim_below_bytes = 0;
    std::function<void()> on_drained;
  };

  class Lease {
   public:
    Lease(Lease&& other) noexcept
        : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
    Lease& operator=(Lease&& other) noexcept {
      if (this != &other) {
        Release();
        budget_ = std::exchange(other.budget_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
      }
      return *this;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { Release(); }

    int64_t bytes() const { return bytes_; }

   private:
    friend class MemoryBudget;
    Lease(MemoryBudget* budget, int64_t bytes) : budget_(budget), bytes_(bytes) {}
    void Release() {
      if (budget_ != nullptr) {
        budget_->Release(bytes_);
        budget_ = nullptr;
        bytes_ = 0;
      }
    }
    MemoryBudget* budget_;
    int64_t bytes_;
  };

  explicit MemoryBudget(Options options) : options_(std::move(options)) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Whether a request of `bytes` could ever be admitted (false: answer 413, not 429).
  bool Fits(int64_t bytes) const { return options_.capacity_bytes <= 0 || bytes <= options_.capacity_bytes; }

  // A lease of `bytes`, or nullopt when the bytes held plus these would exceed the capacity.
  std::optional<Lease> TryAcquire(int64_t bytes) {
    bytes = std::max<int64_t>(bytes, 0);
    int64_t current = in_flight_.load(std::memory_order_relaxed);
    do {
      if (options_.capacity_bytes > 0 && current + bytes > options_.capacity_bytes) return std::nullopt;
    } while (!in_flight_.compare_exchange_weak(current, current + bytes, std::memory_order_acquire,
                                               std::memory_order_relaxed));
    if (options_.trim_above_bytes > 0 && current + bytes >= options_.trim_above_bytes) {
      armed_.store(true, std::memory_order_relaxed);
    }
    return Lease(this, bytes);
  }

  int64_t in_flight_bytes() const { return in_flight_.load(std::memory_order_relaxed); }
  int64_t capacity_bytes() const { return options_.capacity_bytes; }

 private:
  void Release(int64_t bytes) {
    const int64_t now = in_flight_.fetch_sub(bytes, std::memory_order_release) - bytes;
    if (now <= options_.trim_below_bytes && armed_.load(std::memory_order_relaxed) &&
        armed_.exchange(false, std::memory_order_acq_rel) && options_.on_drained) {
      options_.on_drained();
    }
  }

  const Options options_;
  std::atomic<int64_t> in_flight_{0};
  std::atomic<bool> armed_{false};
};

}  // namespace tide::guard
