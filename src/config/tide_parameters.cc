#include "config/tide_parameters.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tide::config {
namespace {

// absl 20220623 here has its own string_view type; the public API takes std::string_view.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status ParamError(absl::string_view file, absl::string_view key, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": parameters[\"", key, "\"]: ", message));
}

absl::StatusOr<bool> ParseBool(absl::string_view file, absl::string_view key, absl::string_view value) {
  std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(value));
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  return ParamError(file, key, absl::StrCat("expected \"true\" or \"false\", got \"", value, "\""));
}

absl::StatusOr<int64_t> ParseInt(absl::string_view file, absl::string_view key, absl::string_view value,
                                 int64_t min, int64_t max) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v)) {
    return ParamError(file, key, absl::StrCat("expected an integer, got \"", value, "\""));
  }
  if (v < min || v > max) {
    return ParamError(file, key, absl::StrCat(v, " is out of range [", min, ", ", max, "]"));
  }
  return v;
}

template <typename E, size_t N>
absl::StatusOr<E> ParseChoice(absl::string_view file, absl::string_view key, absl::string_view value,
                              const std::pair<std::string_view, E> (&choices)[N]) {
  std::string names;
  for (const auto& [name, e] : choices) {
    if (Av(name) == value) return e;
    absl::StrAppend(&names, names.empty() ? "" : ", ", "\"", Av(name), "\"");
  }
  return ParamError(file, key, absl::StrCat("unknown value \"", value, "\"; expected one of ", names));
}

constexpr std::pair<std::string_view, Task> kTasks[] = {{"rerank", Task::kRerank},
                                                        {"classify", Task::kClassify}};
constexpr std::pair<std::string_view, ScoreActivation> kActivations[] = {
    {"sigmoid", ScoreActivation::kSigmoid},
    {"none", ScoreActivation::kNone},
    {"softmax", ScoreActivation::kSoftmax}};
constexpr std::pair<std::string_view, tokenizer::TruncationDirection> kDirections[] = {
    {"right", tokenizer::TruncationDirection::kRight}, {"left", tokenizer::TruncationDirection::kLeft}};
constexpr std::pair<std::string_view, GraphOptimizationLevel> kLevels[] = {
    {"all", GraphOptimizationLevel::kAll},
    {"extended", GraphOptimizationLevel::kExtended},
    {"basic", GraphOptimizationLevel::kBasic},
    {"disable", GraphOptimizationLevel::kDisable}};
constexpr std::pair<std::string_view, BatchGrouping> kGroupings[] = {
    {"length", BatchGrouping::kLength}, {"fifo", BatchGrouping::kFifo}};
constexpr std::pair<std::string_view, GraphFusion> kFusions[] = {{"auto", GraphFusion::kAuto},
                                                                 {"off", GraphFusion::kOff}};

// "[2.5, -2.5]" or "2.5,-2.5": one finite number per label.
absl::StatusOr<std::vector<float>> ParseDefaultResult(absl::string_view file, absl::string_view key,
                                                      absl::string_view value) {
  absl::string_view list = absl::StripAsciiWhitespace(value);
  if (absl::ConsumePrefix(&list, "[") != absl::ConsumeSuffix(&list, "]")) {
    return ParamError(file, key, absl::StrCat("unbalanced brackets in \"", value, "\""));
  }
  if (absl::StripAsciiWhitespace(list).empty()) {
    return ParamError(file, key, "expected one number per output label, e.g. \"[2.5, -2.5]\"; got none");
  }
  std::vector<float> values;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    double v = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(part), &v) || !std::isfinite(v) ||
        std::abs(v) > std::numeric_limits<float>::max()) {
      return ParamError(file, key, absl::StrCat("expected a finite number, got \"", absl::StripAsciiWhitespace(part),
                                                "\" in \"", value, "\""));
    }
    values.push_back(static_cast<float>(v));
  }
  return values;
}

constexpr int64_t kMaxThreads = 1024;
constexpr int64_t kMaxSequenceLengthLimit = 1 << 20;

}  // namespace

absl::StatusOr<TideParameters> TideParameters::FromConfig(const ModelConfig& config,
                                                          std::string_view file_in) {
  const absl::string_view file = Av(file_in);
  TideParameters p;
  // Sorted keys, so that with several bad keys the error is deterministic.
  std::map<std::string, std::string> params;
  for (const auto& [key, value] : config.parameters()) params[key] = value.string_value();
  for (const auto& [key, value] : params) {
    if (key == "task") {
      auto v = ParseChoice(file, key, value, kTasks);
      if (!v.ok()) return v.status();
      p.task = *v;
    } else if (key == "tokenizer") {
      if (value.empty()) return ParamError(file, key, "must name a file");
      std::filesystem::path path(value);
      bool escapes = path.is_absolute() || path.has_root_name();
      for (const auto& part : path) escapes = escapes || part == "..";
      if (escapes) {
        return ParamError(file, key, "must be a file name relative to the model directory");
      }
      p.tokenizer = value;
    } else if (key == "max_sequence_length") {
      auto v = ParseInt(file, key, value, 2, kMaxSequenceLengthLimit);
      if (!v.ok()) return v.status();
      p.max_sequence_length = *v;
    } else if (key == "truncation_direction") {
      auto v = ParseChoice(file, key, value, kDirections);
      if (!v.ok()) return v.status();
      p.truncation_direction = *v;
    } else if (key == "score_activation") {
      auto v = ParseChoice(file, key, value, kActivations);
      if (!v.ok()) return v.status();
      p.score_activation = *v;
    } else if (key == "intra_op_threads" || key == "intra_op_thread_count") {
      auto v = ParseInt(file, key, value, 0, kMaxThreads);
      if (!v.ok()) return v.status();
      p.intra_op_threads = static_cast<int>(*v);
    } else if (key == "inter_op_threads" || key == "inter_op_thread_count") {
      auto v = ParseInt(file, key, value, 0, kMaxThreads);
      if (!v.ok()) return v.status();
      p.inter_op_threads = static_cast<int>(*v);
    } else if (key == "allow_spinning") {
      auto v = ParseBool(file, key, value);
      if (!v.ok()) return v.status();
      p.allow_spinning = *v;
    } else if (key == "graph_optimization_level") {
      auto v = ParseChoice(file, key, value, kLevels);
      if (!v.ok()) return v.status();
      p.graph_optimization_level = *v;
    } else if (key == "enable_cpu_mem_arena") {
      auto v = ParseBool(file, key, value);
      if (!v.ok()) return v.status();
      p.enable_cpu_mem_arena = *v;
    } else if (key == "max_batch_tokens") {
      auto v = ParseInt(file, key, value, 16, int64_t{1} << 24);
      if (!v.ok()) return v.status();
      p.max_batch_tokens = *v;
    } else if (key == "sequence_buckets" || key == "allowed_batch_sizes") {
      const bool buckets = key == "sequence_buckets";
      std::vector<int64_t> sizes;
      for (absl::string_view part : absl::StrSplit(value, ',')) {
        auto v = ParseInt(file, key, absl::StripAsciiWhitespace(part), 1,
                          buckets ? kMaxSequenceLengthLimit : int64_t{1} << 20);
        if (!v.ok()) return v.status();
        if (!sizes.empty() && *v <= sizes.back()) {
          return ParamError(file, key, buckets ? "bucket lengths must be strictly increasing"
                                               : "batch sizes must be strictly increasing");
        }
        sizes.push_back(*v);
      }
      (buckets ? p.sequence_buckets : p.allowed_batch_sizes) = std::move(sizes);
    } else if (key == "batch_grouping") {
      auto v = ParseChoice(file, key, value, kGroupings);
      if (!v.ok()) return v.status();
      p.batch_grouping = *v;
    } else if (key == "graph_fusion") {
      auto v = ParseChoice(file, key, value, kFusions);
      if (!v.ok()) return v.status();
      p.graph_fusion = *v;
    } else if (key == "breaker_p99_ms") {
      auto v = ParseInt(file, key, value, 0, int64_t{1} << 32);
      if (!v.ok()) return v.status();
      p.breaker_p99_ms = *v;
    } else if (key == "breaker_min_samples") {
      auto v = ParseInt(file, key, value, 1, int64_t{1} << 24);
      if (!v.ok()) return v.status();
      p.breaker_min_samples = *v;
    } else if (key == "breaker_window_s" || key == "breaker_open_s" || key == "breaker_probes") {
      auto v = ParseInt(file, key, value, 1, 86400);
      if (!v.ok()) return v.status();
      (key == "breaker_window_s" ? p.breaker_window_s : key == "breaker_open_s" ? p.breaker_open_s : p.breaker_probes) = *v;
    } else if (key == "breaker_error_rate" || key == "breaker_queue_fullness") {
      double v = 0;
      if (!absl::SimpleAtod(value, &v) || !(v >= 0.0 && v <= 1.0)) {
        return ParamError(file, key, absl::StrCat("expected a number in [0, 1], got \"", value, "\""));
      }
      (key == "breaker_error_rate" ? p.breaker_error_rate : p.breaker_queue_fullness) = v;
    } else if (key == "max_padding_ratio") {
      double v = 0;
      if (!absl::SimpleAtod(value, &v) || !(v == 0.0 || (v >= 1.0 && v <= 1024.0))) {
        return ParamError(file, key, absl::StrCat("expected 0 (no limit) or a number in [1, 1024], got \"", value, "\""));
      }
      p.max_padding_ratio = v;
    } else if (key == "breaker_default_result") {
      auto v = ParseDefaultResult(file, key, value);
      if (!v.ok()) return v.status();
      p.breaker_default_result = *std::move(v);
    } else {
      return ParamError(file, key,
                        "unknown parameter (tide knows task, tokenizer, max_sequence_length, "
                        "truncation_direction, score_activation, intra_op_threads, "
                        "inter_op_threads, allow_spinning, graph_optimization_level, "
                        "enable_cpu_mem_arena, max_batch_tokens, sequence_buckets, allowed_batch_sizes, batch_grouping, "
                        "graph_fusion, max_padding_ratio, "
                        "breaker_p99_ms, breaker_error_rate, breaker_queue_fullness, "
                        "breaker_window_s, breaker_min_samples, breaker_open_s, breaker_probes, "
                        "breaker_default_result)");
    }
  }
  if (!p.breaker_default_result.empty()) {
    if (p.task != Task::kClassify) {
      return ParamError(file, "breaker_default_result",
                        "applies to task \"classify\" only (a reranker's fallback is BM25)");
    }
    if (!p.breaker_enabled()) {
      return ParamError(file, "breaker_default_result",
                        "has no effect without a breaker trigger (breaker_p99_ms, breaker_error_rate or "
                        "breaker_queue_fullness)");
    }
  }
  return p;
}

int64_t TideParameters::EffectiveMaxSequenceLength(std::optional<int64_t> tokenizer_max_length) const {
  if (max_sequence_length) return *max_sequence_length;
  if (tokenizer_max_length && *tokenizer_max_length > 0) return *tokenizer_max_length;
  return kDefaultMaxSequenceLength;
}

std::string_view TaskName(Task task) {
  for (const auto& [name, t] : kTasks) if (t == task) return name;
  return "?";
}

std::string_view ScoreActivationName(ScoreActivation activation) {
  for (const auto& [name, a] : kActivations) if (a == activation) return name;
  return "?";
}

}  // namespace tide::config
