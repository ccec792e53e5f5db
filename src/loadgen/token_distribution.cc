#include "loadgen/token_distribution.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tide::loadgen {

absl::StatusOr<TokenDistribution> TokenDistribution::FromQuantiles(
    std::vector<std::pair<double, double>> points) {
  if (points.size() < 2) return absl::InvalidArgumentError("a distribution needs at least two points");
  if (points.front().first != 0.0 || points.back().first != 1.0)
    return absl::InvalidArgumentError("distribution points must start at quantile 0 and end at 1");
  for (size_t i = 0; i < points.size(); ++i) {
    if (points[i].second < 1)
      return absl::InvalidArgumentError("token counts must be at least 1");
    if (i > 0 && (points[i].first <= points[i - 1].first || points[i].second < points[i - 1].second))
      return absl::InvalidArgumentError(
          "distribution quantiles must increase and token counts must not decrease");
  }
  TokenDistribution d;
  d.points_ = std::move(points);
  for (const auto& [q, t] : d.points_)
    absl::StrAppend(&d.spec_, d.spec_.empty() ? "quantiles:" : ",", q, "=", t);
  return d;
}

TokenDistribution TokenDistribution::SciFact(TextKind kind) {
  TokenDistribution d;
  if (kind == TextKind::kQuery) {
    d.points_ = {{0, 6}, {0.5, 19}, {0.9, 34}, {0.99, 42}, {1, 60}};
  } else {
    d.points_ = {{0, 94}, {0.5, 314}, {0.9, 500}, {0.99, 762}, {1, 1937}};
  }
  d.spec_ = "scifact";
  return d;
}

absl::StatusOr<TokenDistribution> TokenDistribution::Parse(std::string_view std_spec, TextKind kind) {
  const absl::string_view spec(std_spec.data(), std_spec.size());
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("token distribution '", spec, "': ", why));
  };
  if (spec == "scifact") return SciFact(kind);
  double fixed = 0;
  if (absl::SimpleAtod(spec, &fixed)) {
    if (fixed < 1) return bad("must be at least 1");
    auto d = FromQuantiles({{0, fixed}, {1, fixed}});
    if (d.ok()) d->spec_ = std::string(spec);
    return d;
  }
  absl::string_view rest = spec;
  if (absl::ConsumePrefix(&rest, "uniform:")) {
    std::vector<absl::string_view> parts = absl::StrSplit(rest, ':');
    double a = 0, b = 0;
    if (parts.size() != 2 || !absl::SimpleAtod(parts[0], &a) || !absl::SimpleAtod(parts[1], &b))
      return bad("expected uniform:A:B");
    if (a < 1 || b < a) return bad("expected 1 <= A <= B");
    auto d = FromQuantiles({{0, a}, {1, b}});
    if (d.ok()) d->spec_ = std::string(spec);
    return d;
  }
  if (absl::ConsumePrefix(&rest, "quantiles:")) {
    std::vector<std::pair<double, double>> points;
    for (absl::string_view item : absl::StrSplit(rest, ',')) {
      std::vector<absl::string_view> kv = absl::StrSplit(item, '=');
      double q = 0, t = 0;
      if (kv.size() != 2 || !absl::SimpleAtod(kv[0], &q) || !absl::SimpleAtod(kv[1], &t))
        return bad("expected quantiles:q=tokens,...");
      points.emplace_back(q, t);
    }
    auto d = FromQuantiles(std::move(points));
    if (!d.ok()) return bad(d.status().message());
    return d;
  }
  return bad("expected scifact, N, uniform:A:B or quantiles:q=t,...");
}

double TokenDistribution::Quantile(double q) const {
  q = std::clamp(q, 0.0, 1.0);
  for (size_t i = 1; i < points_.size(); ++i) {
    if (q <= points_[i].first) {
      const auto& [q0, t0] = points_[i - 1];
      const auto& [q1, t1] = points_[i];
      return t0 + (t1 - t0) * (q - q0) / (q1 - q0);
    }
  }
  return points_.back().second;
}

double TokenDistribution::Mean() const {
  double mean = 0;
  for (size_t i = 1; i < points_.size(); ++i)
    mean += (points_[i].first - points_[i - 1].first) * (points_[i].second + points_[i - 1].second) / 2;
  return mean;
}

int TokenDistribution::Sample(std::mt19937_64& rng) const {
  return std::max(1, static_cast<int>(std::lround(Quantile(UniformUnit(rng)))));
}

}  // namespace tide::loadgen
