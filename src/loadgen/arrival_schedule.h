// tide::loadgen::ArrivalSchedule — intended send times of an open-loop (request-rate) run.
//
// Contract:
//  - Next() returns the offset, from the start of the run, of the next request's intended send
//    time: constant arrivals are exactly 1/rate apart (the first at 0); Poisson arrivals have
//    independent exponential gaps of mean 1/rate (the first after one gap), drawn with inverse
//    CDF from a seeded mt19937_64, so a seed fixes the whole schedule.
//  - Latency in an open-loop run is measured from these intended times, not from when the
//    request actually left, so a slow server cannot hide its queueing by slowing the client
//    (coordinated omission).
//  - Create: kInvalidArgument for a rate that is not positive and finite. Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string_view>

#include "absl/status/statusor.h"

namespace tide::loadgen {

enum class Arrivals { kConstant, kPoisson };

absl::StatusOr<Arrivals> ParseArrivals(std::string_view name);
std::string_view ArrivalsName(Arrivals arrivals);

class ArrivalSchedule {
 public:
  static absl::StatusOr<ArrivalSchedule> Create(double requests_per_second, Arrivals arrivals,
                                                uint64_t seed);
  std::chrono::nanoseconds Next();

 private:
  ArrivalSchedule(double rate, Arrivals arrivals, uint64_t seed)
      : rate_(rate), arrivals_(arrivals), rng_(seed) {}
  double rate_;
  Arrivals arrivals_;
  std::mt19937_64 rng_;
  uint64_t index_ = 0;      // constant: requests issued so far
  double elapsed_s_ = 0;    // poisson: sum of gaps so far
};

}  // namespace tide::loadgen
