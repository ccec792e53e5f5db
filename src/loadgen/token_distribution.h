// tide::loadgen::TokenDistribution — how many tokens a generated query or document has.
//
// Contract:
//  - A distribution is a piecewise-linear quantile function through (quantile, tokens) points,
//    the first at quantile 0 and the last at quantile 1; sampling draws u ~ U[0,1) from the
//    caller's generator and returns round(Q(u)), at least 1. Copyable, immutable, thread-safe.
//  - Parse() accepts (errors: kInvalidArgument naming the spec):
//      "scifact"              the built-in SciFact figures (queries or documents, by `kind`)
//      "N"                    always N tokens
//      "uniform:A:B"          uniform on [A, B]
//      "quantiles:q=t,q=t,..." explicit points, e.g. "quantiles:0=6,0.5=19,0.9=34,1=60"
//
// SciFact figures (../shared/assets/README.md, bert-base-uncased, no special tokens):
//   queries   mean 20.8, p50 19, p90 34, p99 42
//   documents mean 335,  p50 314, p90 500, p99 762, max 1937
// The README gives no minimum (and no query maximum); the end points below are chosen so that the
// piecewise-linear distribution has the published mean: queries (0, 6) … (1, 60) gives
// 0.25*6 + 0.25*19 + 0.2*(19+34) + 0.045*(34+42) + 0.005*(42+60) = 20.8; documents (0, 94) gives
// 0.25*94 + 0.25*314 + 0.2*(314+500) + 0.045*(500+762) + 0.005*(762+1937) = 335.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tide::loadgen {

enum class TextKind { kQuery, kDocument };

class TokenDistribution {
 public:
  static absl::StatusOr<TokenDistribution> FromQuantiles(
      std::vector<std::pair<double, double>> points);
  static absl::StatusOr<TokenDistribution> Parse(std::string_view spec, TextKind kind);
  static TokenDistribution SciFact(TextKind kind);

  // Q(q) for q in [0, 1], linearly interpolated.
  double Quantile(double q) const;
  // The mean of the piecewise-linear distribution (exact).
  double Mean() const;
  int Sample(std::mt19937_64& rng) const;
  const std::string& spec() const { return spec_; }
  const std::vector<std::pair<double, double>>& points() const { return points_; }

 private:
  std::vector<std::pair<double, double>> points_;
  std::string spec_;
};

// u ~ U[0, 1) from the top 53 bits of one draw: the same sequence on every platform (unlike
// std::uniform_real_distribution, whose algorithm the standard leaves open).
inline double UniformUnit(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

}  // namespace tide::loadgen
