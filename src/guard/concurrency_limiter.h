// tide::guard::ConcurrencyLimiter — a lock-free cap on requests in flight, like TEI's
// --max-concurrent-requests. The edge calls TryAcquire() first thing and answers 429 (with
// Retry-After) when it fails, so an overloaded server rejects in constant time without queueing.
//
// Contract:
//  - Thread-safe and lock-free: TryAcquire() is a compare-and-swap loop on one atomic counter; it
//    never blocks and never allocates. It fails only when max_concurrent_requests permits are
//    really held (no spurious rejections from transient over-counting).
//  - A Permit is move-only and releases its slot when destroyed (RAII); hold it for the whole
//    request, including writing the response.
//  - max_concurrent_requests <= 0 means no limit (permits are still counted for in_flight()).
//  - The limiter must outlive every permit it handed out.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <utility>

namespace tide::guard {

class ConcurrencyLimiter {
 public:
  class Permit {
   public:
    Permit(Permit&& other) noexcept : limiter_(std::exchange(other.limiter_, nullptr)) {}
    Permit& operator=(Permit&& other) noexcept {
      if (this != &other) {
        Release();
        limiter_ = std::exchange(other.limiter_, nullptr);
      }
      return *this;
    }
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    ~Permit() { Release(); }

   private:
    friend class ConcurrencyLimiter;
    explicit Permit(ConcurrencyLimiter* limiter) : limiter_(limiter) {}
    void Release() {
      if (limiter_ != nullptr) {
        limiter_->in_flight_.fetch_sub(1, std::memory_order_release);
        limiter_ = nullptr;
      }
    }
    ConcurrencyLimiter* limiter_;
  };

  explicit ConcurrencyLimiter(int64_t max_concurrent_requests)
      : max_concurrent_requests_(max_concurrent_requests) {}

  ConcurrencyLimiter(const ConcurrencyLimiter&) = delete;
  ConcurrencyLimiter& operator=(const ConcurrencyLimiter&) = delete;

  // A permit, or nullopt when max_concurrent_requests permits are held.
  std::optional<Permit> TryAcquire() {
    int64_t current = in_flight_.load(std::memory_order_relaxed);
    do {
      if (max_concurrent_requests_ > 0 && current >= max_concurrent_requests_) return std::nullopt;
    } while (!in_flight_.compare_exchange_weak(current, current + 1, std::memory_order_acquire,
                                               std::memory_order_relaxed));
    return Permit(this);
  }

  int64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  int64_t max_concurrent_requests() const { return max_concurrent_requests_; }

 private:
  const int64_t max_concurrent_requests_;
  std::atomic<int64_t> in_flight_{0};
};

}  // namespace tide::guard
