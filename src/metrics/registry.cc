#include "metrics/registry.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tide::metrics {
namespace {

bool IsValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = absl::ascii_isalpha(c) || c == '_' || c == ':' || (i > 0 && absl::ascii_isdigit(c));
    if (!ok) return false;
  }
  return true;
}

bool IsValidLabelName(std::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__") return false;  // "__" is reserved by Prometheus
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = absl::ascii_isalpha(c) || c == '_' || (i > 0 && absl::ascii_isdigit(c));
    if (!ok) return false;
  }
  return true;
}

// `{a="x",b="y"` without the closing brace, or "" when there are no labels and no extra label.
void AppendLabels(const std::vector<std::string>& names, const std::vector<std::string>& values,
                  std::string_view extra_name, std::string_view extra_value, std::string* out) {
  if (names.empty() && extra_name.empty()) return;
  out->push_back('{');
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out->push_back(',');
    absl::StrAppend(out, names[i], "=\"", EscapeLabelValue(values[i]), "\"");
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out->push_back(',');
    out->append(extra_name).append("=\"").append(extra_value).push_back('"');
  }
  out->push_back('}');
}

void AppendSampleLine(std::string_view name, std::string_view suffix,
                      const std::vector<std::string>& label_names,
                      const std::vector<std::string>& label_values, std::string_view extra_name,
                      std::string_view extra_value, double value, std::string* out) {
  out->append(name).append(suffix);
  AppendLabels(label_names, label_values, extra_name, extra_value, out);
  absl::StrAppend(out, " ", FormatSampleValue(value), "\n");
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

void AppendChildText(const FamilyBase& family, const std::vector<std::string>& values,
                     const Counter& counter, std::string* out) {
  AppendSampleLine(family.name(), "", family.label_names(), values, "", "", counter.Value(), out);
}

void AppendChildText(const FamilyBase& family, const std::vector<std::string>& values,
                     const Gauge& gauge, std::string* out) {
  AppendSampleLine(family.name(), "", family.label_names(), values, "", "", gauge.Value(), out);
}

void AppendChildText(const FamilyBase& family, const std::vector<std::string>& values,
                     const Histogram& histogram, std::string* out) {
  const Histogram::Snapshot snapshot = histogram.TakeSnapshot();
  for (size_t i = 0; i < snapshot.upper_bounds.size(); ++i) {
    AppendSampleLine(family.name(), "_bucket", family.label_names(), values, "le",
                     FormatSampleValue(snapshot.upper_bounds[i]),
                     static_cast<double>(snapshot.cumulative_counts[i]), out);
  }
  AppendSampleLine(family.name(), "_bucket", family.label_names(), values, "le", "+Inf",
                   static_cast<double>(snapshot.count), out);
  AppendSampleLine(family.name(), "_sum", family.label_names(), values, "", "", snapshot.sum, out);
  AppendSampleLine(family.name(), "_count", family.label_names(), values, "", "",
                   static_cast<double>(snapshot.count), out);
}

// ---- OpenMetrics ----

std::string EscapeOpenMetricsHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '"': out += "\\\""; break;
      default: out.push_back(c);
    }
  }
  return out;
}

// A counter's family name in OpenMetrics metadata: without its `_total` suffix (samples have it).
std::string OpenMetricsName(const FamilyBase& family) {
  std::string name = family.name();
  if (family.type() == MetricType::kCounter && name.size() > 6 && name.substr(name.size() - 6) == "_total") {
    name.resize(name.size() - 6);
  }
  return name;
}

void AppendOpenMetricsChild(const FamilyBase& family, const std::vector<std::string>& values, const Counter& counter,
                            std::string* out) {
  AppendSampleLine(OpenMetricsName(family), "_total", family.label_names(), values, "", "", counter.Value(), out);
}

void AppendOpenMetricsChild(const FamilyBase& family, const std::vector<std::string>& values, const Gauge& gauge,
                            std::string* out) {
  AppendSampleLine(family.name(), "", family.label_names(), values, "", "", gauge.Value(), out);
}

void AppendOpenMetricsChild(const FamilyBase& family, const std::vector<std::string>& values,
                            const Histogram& histogram, std::string* out) {
  const Histogram::Snapshot snapshot = histogram.TakeSnapshot();
  const std::vector<std::optional<Histogram::Exemplar>> exemplars = histogram.Exemplars();
  auto bucket = [&](size_t i, std::string_view le, uint64_t count) {
    AppendSampleLine(family.name(), "_bucket", family.label_names(), values, "le", le, static_cast<double>(count), out);
    if (i < exemplars.size() && exemplars[i].has_value()) {
      const Histogram::Exemplar& e = *exemplars[i];
      out->pop_back();  // the sample line's newline
      char ts[32];
      std::snprintf(ts, sizeof(ts), "%.3f", e.unix_seconds);
      absl::StrAppend(out, " # {trace_id=\"", EscapeLabelValue(e.trace_id), "\",span_id=\"",
                      EscapeLabelValue(e.span_id), "\"} ", FormatSampleValue(e.value), " ", ts, "\n");
    }
  };
  for (size_t i = 0; i < snapshot.upper_bounds.size(); ++i) {
    bucket(i, FormatSampleValue(snapshot.upper_bounds[i]), snapshot.cumulative_counts[i]);
  }
  bucket(snapshot.upper_bounds.size(), "+Inf", snapshot.count);
  AppendSampleLine(family.name(), "_sum", family.label_names(), values, "", "", snapshot.sum, out);
  AppendSampleLine(family.name(), "_count", family.label_names(), values, "", "", static_cast<double>(snapshot.count),
                   out);
}

template <typename T>
constexpr MetricType TypeOf();
template <>
constexpr MetricType TypeOf<Counter>() { return MetricType::kCounter; }
template <>
constexpr MetricType TypeOf<Gauge>() { return MetricType::kGauge; }
template <>
constexpr MetricType TypeOf<Histogram>() { return MetricType::kHistogram; }

}  // namespace

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == 0.0) return "0";
  char buffer[64];
  const double magnitude = std::fabs(value);
  std::to_chars_result result;
  if (magnitude >= 1e-4 && magnitude < 1e15) {
    result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::fixed);
  } else {
    result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  }
  return std::string(buffer, result.ptr);
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

// ---- Family<T> ----------------------------------------------------------------------------------

template <typename T>
Family<T>::Family(std::string name, std::string help, std::vector<std::string> label_names,
                  std::vector<double> histogram_bounds)
    : FamilyBase(std::move(name), std::move(help), std::move(label_names)),
      histogram_bounds_(std::move(histogram_bounds)) {
  if (this->label_names().empty()) {
    absl::MutexLock lock(&mu_);
    children_.emplace(std::vector<std::string>{}, MakeChild());
  }
}

template <typename T>
std::unique_ptr<T> Family<T>::MakeChild() const {
  if constexpr (std::is_same_v<T, Histogram>) {
    return std::make_unique<Histogram>(histogram_bounds_);
  } else {
    return std::make_unique<T>();
  }
}

template <typename T>
absl::StatusOr<T*> Family<T>::Lookup(std::span<const std::string_view> label_values) {
  if (label_values.size() != label_names().size()) {
    return absl::InvalidArgumentError(absl::StrCat("metric ", name(), " takes ", label_names().size(),
                                                   " label values, got ", label_values.size()));
  }
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = children_.find(label_values);
    if (it != children_.end()) return it->second.get();
  }
  absl::MutexLock lock(&mu_);
  auto it = children_.find(label_values);
  if (it == children_.end()) {
    it = children_.emplace(std::vector<std::string>(label_values.begin(), label_values.end()), MakeChild()).first;
  }
  return it->second.get();
}

template <typename T>
T* Family<T>::OrDie(absl::StatusOr<T*> child) {
  if (!child.ok()) {
    std::fprintf(stderr, "tide::metrics: %s\n", child.status().ToString().c_str());
    std::abort();
  }
  return *child;
}

template <typename T>
absl::StatusOr<T*> Family<T>::TryWithLabels(std::initializer_list<std::string_view> label_values) {
  return Lookup(std::span<const std::string_view>(label_values.begin(), label_values.size()));
}

template <typename T>
absl::StatusOr<T*> Family<T>::TryWithLabels(const std::vector<std::string>& label_values) {
  const std::vector<std::string_view> views(label_values.begin(), label_values.end());
  return Lookup(views);
}

template <typename T>
T* Family<T>::WithLabels(std::initializer_list<std::string_view> label_values) {
  return OrDie(TryWithLabels(label_values));
}

template <typename T>
T* Family<T>::WithLabels(const std::vector<std::string>& label_values) {
  return OrDie(TryWithLabels(label_values));
}

template <typename T>
MetricType Family<T>::type() const {
  return TypeOf<T>();
}

template <typename T>
void Family<T>::AppendText(std::string* out) const {
  absl::ReaderMutexLock lock(&mu_);
  if (children_.empty()) return;
  absl::StrAppend(out, "# HELP ", name(), " ", EscapeHelp(help()), "\n");
  absl::StrAppend(out, "# TYPE ", name(), " ", TypeName(type()), "\n");
  for (const auto& [values, child] : children_) AppendChildText(*this, values, *child, out);
}

template <typename T>
void Family<T>::AppendOpenMetrics(std::string* out) const {
  absl::ReaderMutexLock lock(&mu_);
  if (children_.empty()) return;
  absl::StrAppend(out, "# TYPE ", OpenMetricsName(*this), " ", TypeName(type()), "\n");
  absl::StrAppend(out, "# HELP ", OpenMetricsName(*this), " ", EscapeOpenMetricsHelp(help()), "\n");
  for (const auto& [values, child] : children_) AppendOpenMetricsChild(*this, values, *child, out);
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

// ---- Registry -----------------------------------------------------------------------------------

absl::Status Registry::CheckNewFamily(const std::string& name,
                                      const std::vector<std::string>& label_names) const {
  if (!IsValidMetricName(name)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid metric name '", name, "'"));
  }
  for (size_t i = 0; i < label_names.size(); ++i) {
    if (!IsValidLabelName(label_names[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid label name '", label_names[i], "' for metric ", name));
    }
    for (size_t j = 0; j < i; ++j) {
      if (label_names[i] == label_names[j]) {
        return absl::InvalidArgumentError(
            absl::StrCat("duplicate label name '", label_names[i], "' for metric ", name));
      }
    }
  }
  for (const auto& family : families_) {
    if (family->name() == name) {
      return absl::AlreadyExistsError(absl::StrCat("metric ", name, " is already registered"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Family<Counter>*> Registry::AddCounter(std::string name, std::string help,
                                                      std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  if (absl::Status status = CheckNewFamily(name, label_names); !status.ok()) return status;
  auto* family = new Family<Counter>(std::move(name), std::move(help), std::move(label_names), {});
  families_.emplace_back(family);
  return family;
}

absl::StatusOr<Family<Gauge>*> Registry::AddGauge(std::string name, std::string help,
                                                  std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  if (absl::Status status = CheckNewFamily(name, label_names); !status.ok()) return status;
  auto* family = new Family<Gauge>(std::move(name), std::move(help), std::move(label_names), {});
  families_.emplace_back(family);
  return family;
}

absl::StatusOr<Family<Histogram>*> Registry::AddHistogram(std::string name, std::string help,
                                                          std::vector<std::string> label_names,
                                                          std::vector<double> upper_bounds) {
  absl::MutexLock lock(&mu_);
  if (absl::Status status = CheckNewFamily(name, label_names); !status.ok()) return status;
  for (const std::string& label : label_names) {
    if (label == "le") {
      return absl::InvalidArgumentError(absl::StrCat("histogram ", name, " cannot have an 'le' label"));
    }
  }
  for (size_t i = 0; i < upper_bounds.size(); ++i) {
    if (!std::isfinite(upper_bounds[i]) || (i > 0 && !(upper_bounds[i] > upper_bounds[i - 1]))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram ", name, " bucket bounds must be finite and strictly increasing"));
    }
  }
  auto* family = new Family<Histogram>(std::move(name), std::move(help), std::move(label_names),
                                       std::move(upper_bounds));
  families_.emplace_back(family);
  return family;
}

std::string Registry::RenderOpenMetrics() const {
  std::string out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& family : families_) family->AppendOpenMetrics(&out);
  }
  out += "# EOF\n";
  return out;
}

bool AcceptsOpenMetrics(std::string_view accept) {
  return accept.find("application/openmetrics-text") != std::string_view::npos;
}

std::string Registry::RenderText() const {
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& family : families_) family->AppendText(&out);
  return out;
}

}  // namespace tide::metrics
