#include "loadgen/arrival_schedule.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "loadgen/token_distribution.h"

namespace tide::loadgen {

absl::StatusOr<Arrivals> ParseArrivals(std::string_view name) {
  if (name == "constant") return Arrivals::kConstant;
  if (name == "poisson") return Arrivals::kPoisson;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown arrivals '", std::string(name), "' (constant, poisson)"));
}

std::string_view ArrivalsName(Arrivals arrivals) {
  return arrivals == Arrivals::kConstant ? "constant" : "poisson";
}

absl::StatusOr<ArrivalSchedule> ArrivalSchedule::Create(double rate, Arrivals arrivals,
                                                        uint64_t seed) {
  if (!(rate > 0) || !std::isfinite(rate))
    return absl::InvalidArgumentError("the request rate must be a positive number");
  return ArrivalSchedule(rate, arrivals, seed);
}

std::chrono::nanoseconds ArrivalSchedule::Next() {
  double t_s = 0;
  if (arrivals_ == Arrivals::kConstant) {
    // Multiply instead of accumulating so that rounding does not drift over long runs.
    t_s = static_cast<double>(index_++) / rate_;
  } else {
    elapsed_s_ += -std::log1p(-UniformUnit(rng_)) / rate_;
    t_s = elapsed_s_;
  }
  return std::chrono::nanoseconds(static_cast<int64_t>(std::llround(t_s * 1e9)));
}

}  // namespace tide::loadgen
