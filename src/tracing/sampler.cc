#include "tracing/sampler.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <utility>

#include "common/absl_view.h"
#include "absl/strings/str_cat.h"

namespace tide::tracing {
namespace {

using common::AbslView;

constexpr uint64_t kMax56 = uint64_t{1} << 56;

class AlwaysOn final : public Sampler {
 public:
  SamplingDecision ShouldSample(const SpanContext*, const TraceId&) const override {
    return SamplingDecision::kRecordAndSample;
  }
  std::string Description() const override { return "AlwaysOnSampler"; }
};

class AlwaysOff final : public Sampler {
 public:
  SamplingDecision ShouldSample(const SpanContext*, const TraceId&) const override {
    return SamplingDecision::kDrop;
  }
  std::string Description() const override { return "AlwaysOffSampler"; }
};

class TraceIdRatio final : public Sampler {
 public:
  explicit TraceIdRatio(double ratio) : ratio_(std::isnan(ratio) ? 0.0 : std::clamp(ratio, 0.0, 1.0)) {
    threshold_ = ratio_ >= 1.0 ? 0 : ratio_ <= 0.0 ? kMax56
                                                  : static_cast<uint64_t>(std::llround((1.0 - ratio_) *
                                                                                       static_cast<double>(kMax56)));
  }
  SamplingDecision ShouldSample(const SpanContext*, const TraceId& trace_id) const override {
    uint64_t randomness = 0;
    for (size_t i = 9; i < 16; ++i) randomness = randomness << 8 | trace_id[i];
    return randomness >= threshold_ ? SamplingDecision::kRecordAndSample : SamplingDecision::kDrop;
  }
  std::string Description() const override { return absl::StrCat("TraceIdRatioBased{", ratio_, "}"); }

 private:
  double ratio_;
  uint64_t threshold_;
};

class ParentBased final : public Sampler {
 public:
  explicit ParentBased(std::unique_ptr<Sampler> root) : root_(std::move(root)) {}
  SamplingDecision ShouldSample(const SpanContext* parent, const TraceId& trace_id) const override {
    if (parent != nullptr && parent->IsValid()) {
      return parent->sampled() ? SamplingDecision::kRecordAndSample : SamplingDecision::kDrop;
    }
    return root_->ShouldSample(parent, trace_id);
  }
  std::string Description() const override {
    return absl::StrCat("ParentBased{root=", root_->Description(), "}");
  }

 private:
  std::unique_ptr<Sampler> root_;
};

absl::StatusOr<double> ParseRatio(std::optional<std::string_view> arg) {
  if (!arg || arg->empty()) return 1.0;
  double ratio = 0;
  const char* end = arg->data() + arg->size();
  const auto [ptr, ec] = std::from_chars(arg->data(), end, ratio);
  if (ec != std::errc() || ptr != end || std::isnan(ratio) || ratio < 0.0 || ratio > 1.0) {
    return absl::InvalidArgumentError(absl::StrCat("sampler argument \"", AbslView(*arg),
                                                   "\" is not a ratio: give a number from 0 to 1"));
  }
  return ratio;
}

}  // namespace

std::unique_ptr<Sampler> MakeAlwaysOnSampler() { return std::make_unique<AlwaysOn>(); }
std::unique_ptr<Sampler> MakeAlwaysOffSampler() { return std::make_unique<AlwaysOff>(); }
std::unique_ptr<Sampler> MakeTraceIdRatioSampler(double ratio) { return std::make_unique<TraceIdRatio>(ratio); }
std::unique_ptr<Sampler> MakeParentBasedSampler(std::unique_ptr<Sampler> root) {
  return std::make_unique<ParentBased>(std::move(root));
}

absl::StatusOr<std::unique_ptr<Sampler>> MakeSampler(std::string_view name,
                                                     std::optional<std::string_view> arg) {
  if (name == "always_on") return MakeAlwaysOnSampler();
  if (name == "always_off") return MakeAlwaysOffSampler();
  if (name == "parentbased_always_on") return MakeParentBasedSampler(MakeAlwaysOnSampler());
  if (name == "parentbased_always_off") return MakeParentBasedSampler(MakeAlwaysOffSampler());
  if (name == "traceidratio" || name == "parentbased_traceidratio") {
    absl::StatusOr<double> ratio = ParseRatio(arg);
    if (!ratio.ok()) return ratio.status();
    std::unique_ptr<Sampler> sampler = MakeTraceIdRatioSampler(*ratio);
    if (name == "traceidratio") return sampler;
    return MakeParentBasedSampler(std::move(sampler));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown sampler \"", AbslView(name),
      "\": use always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or "
      "parentbased_traceidratio"));
}

}  // namespace tide::tracing
