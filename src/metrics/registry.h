// tide::metrics::Registry — named metric families rendered in the Prometheus text exposition
// format 0.0.4 (what GET /metrics returns), or in OpenMetrics 1.0 with exemplars when asked.
//
// Contract:
//  - A Registry owns its families; a Family owns its children (one per label-value set). Pointers
//    returned by Add*() and WithLabels() stay valid, at a fixed address, for the Registry's life.
//  - Thread safety: everything is safe to call concurrently. Updating a child is lock-free.
//    WithLabels() takes a shared (reader) lock to look a child up and an exclusive lock only the first
//    time a label set appears, so hot paths should call it once and keep the pointer.
//  - Errors: Add*() returns INVALID_ARGUMENT for a name or label name that Prometheus rejects, a
//    histogram with an `le` label or bounds that are not strictly increasing and finite, and
//    ALREADY_EXISTS when a family of that name is registered already. WithLabels() with the wrong
//    number of values is a programming error and aborts; TryWithLabels() returns INVALID_ARGUMENT.
//  - RenderText() lists families in registration order and children sorted by label values.
//    Families that have label names but no child yet are left out; a family without label names
//    always has its single child (rendered as 0 until updated).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "metrics/metric.h"

namespace tide::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  virtual MetricType type() const = 0;
  // Appends this family's HELP, TYPE and sample lines to `out`.
  virtual void AppendText(std::string* out) const = 0;
  // The same in the OpenMetrics text format (counters' metadata without `_total`, histogram
  // buckets with their exemplars).
  virtual void AppendOpenMetrics(std::string* out) const = 0;

 protected:
  FamilyBase(std::string name, std::string help, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}

 private:
  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
};

// T is Counter, Gauge or Histogram.
template <typename T>
class Family final : public FamilyBase {
 public:
  // The child for `label_values` (one per label name, same order), created on first use. Finding
  // an existing child allocates nothing.
  T* WithLabels(std::initializer_list<std::string_view> label_values);
  T* WithLabels(const std::vector<std::string>& label_values);
  absl::StatusOr<T*> TryWithLabels(std::initializer_list<std::string_view> label_values);
  absl::StatusOr<T*> TryWithLabels(const std::vector<std::string>& label_values);

  MetricType type() const override;
  void AppendText(std::string* out) const override;
  void AppendOpenMetrics(std::string* out) const override;

 private:
  friend class Registry;
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> histogram_bounds);
  std::unique_ptr<T> MakeChild() const;
  absl::StatusOr<T*> Lookup(std::span<const std::string_view> label_values);
  static T* OrDie(absl::StatusOr<T*> child);

  // Orders label-value tuples; transparent so that a span of string_views finds a stored vector of
  // strings without building one.
  struct LabelsLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
        return std::string_view(x) < std::string_view(y);
      });
    }
  };

  const std::vector<double> histogram_bounds_;  // used only when T is Histogram
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>, LabelsLess> children_ ABSL_GUARDED_BY(mu_);
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  absl::StatusOr<Family<Counter>*> AddCounter(std::string name, std::string help,
                                              std::vector<std::string> label_names = {});
  absl::StatusOr<Family<Gauge>*> AddGauge(std::string name, std::string help,
                                          std::vector<std::string> label_names = {});
  absl::StatusOr<Family<Histogram>*> AddHistogram(
      std::string name, std::string help, std::vector<std::string> label_names = {},
      std::vector<double> upper_bounds = DefaultLatencyBuckets());

  // Prometheus text format 0.0.4; serve with
  // Content-Type: text/plain; version=0.0.4; charset=utf-8
  std::string RenderText() const;
  // OpenMetrics 1.0 text (what a scraper sending `Accept: application/openmetrics-text` gets):
  // the same families, histogram buckets with their latest exemplar (`# {trace_id="...",
  // span_id="..."} value timestamp`), ending in `# EOF`. Serve with kOpenMetricsContentType.
  std::string RenderOpenMetrics() const;

 private:
  absl::Status CheckNewFamily(const std::string& name, const std::vector<std::string>& label_names)
      const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<FamilyBase>> families_ ABSL_GUARDED_BY(mu_);
};

// Content type of RenderText() output.
inline constexpr char kPrometheusTextContentType[] = "text/plain; version=0.0.4; charset=utf-8";
inline constexpr char kOpenMetricsContentType[] = "application/openmetrics-text; version=1.0.0; charset=utf-8";
// Whether an Accept header asks for OpenMetrics.
bool AcceptsOpenMetrics(std::string_view accept);

// Formatting helpers, exposed for tests and for other exposition code.
std::string FormatSampleValue(double value);          // "1", "0.25", "+Inf", "NaN", "1e-07"
std::string EscapeLabelValue(std::string_view value);  // \ " and newline escaped
std::string EscapeHelp(std::string_view help);         // \ and newline escaped

}  // namespace tide::metrics
