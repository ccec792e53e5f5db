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
#include "common/absl_view.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace tide::config {
namespace {

using common::AbslView;

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
    if (AbslView(name) == value) return e;
    absl::StrAppend(&names, names.empty() ? "" : ", ", "\"", AbslView(name), "\"");
  }
  return ParamError(file, key, absl::StrCat("unknown value \"", value, "\"; expected one of ", names));
}

constexpr std::pair<std::string_view, Task> kTasks[] = {
    {"rerank", Task::kRerank}, {"classify", Task::kClassify}, {"embed", Task::kEmbed}};
constexpr std::pair<std::string_view, Pooling> kPoolings[] = {
    {"cls", Pooling::kCls}, {"mean", Pooling::kMean}, {"last_token", Pooling::kLastToken}};
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
constexpr std::pair<std::string_view, LongDocuments> kLongDocuments[] = {
    {"truncate", LongDocuments::kTruncate},
    {"chunk_max", LongDocuments::kChunkMax},
    {"chunk_mean", LongDocuments::kChunkMean}};
constexpr std::pair<std::string_view, BatchGrouping> kGroupings[] = {
    {"length", BatchGrouping::kLength}, {"fifo", BatchGrouping::kFifo}};
constexpr std::pair<std::string_view, BatchPadding> kPaddings[] = {
    {"bucket", BatchPadding::kBucket}, {"longest", BatchPadding::kLongest}};
constexpr std::pair<std::string_view, ThreadLayout> kThreadLayouts[] = {{"adaptive", ThreadLayout::kAdaptive},
                                                                       {"fixed", ThreadLayout::kFixed}};
constexpr std::pair<std::string_view, GraphFusion> kFusions[] = {{"auto", GraphFusion::kAuto},
                                                                 {"off", GraphFusion::kOff}};
constexpr std::pair<std::string_view, KernelChoice> kKernelChoices[] = {
    {"tide", KernelChoice::kTide}, {"onnxruntime", KernelChoice::kOnnxRuntime}};
constexpr std::pair<std::string_view, AttentionPrecision> kAttentionPrecisions[] = {
    {"auto", AttentionPrecision::kAuto}, {"fp32", AttentionPrecision::kFp32}, {"bf16", AttentionPrecision::kBf16}};

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

// One entry per key: its name and how its value is read into TideParameters. This table is the one
// list of keys: FromConfig looks keys up in it and the unknown-key error lists it.
using Setter = absl::Status (*)(absl::string_view file, absl::string_view key, absl::string_view value,
                                TideParameters* p);
struct ParameterKey {
  std::string_view name;
  Setter set;
};

// Setters for the common shapes of value: an enum choice, a bool, a bounded integer, a number.
#define TIDE_CHOICE(field, choices)                                                       \
  [](absl::string_view file, absl::string_view key, absl::string_view value,              \
     TideParameters* p) -> absl::Status {                                                 \
    auto v = ParseChoice(file, key, value, choices);                                      \
    if (!v.ok()) return v.status();                                                       \
    p->field = *v;                                                                        \
    return absl::OkStatus();                                                              \
  }
#define TIDE_BOOL(field)                                                                  \
  [](absl::string_view file, absl::string_view key, absl::string_view value,              \
     TideParameters* p) -> absl::Status {                                                 \
    auto v = ParseBool(file, key, value);                                                 \
    if (!v.ok()) return v.status();                                                       \
    p->field = *v;                                                                        \
    return absl::OkStatus();                                                              \
  }
#define TIDE_INT(field, type, min, max)                                                   \
  [](absl::string_view file, absl::string_view key, absl::string_view value,              \
     TideParameters* p) -> absl::Status {                                                 \
    auto v = ParseInt(file, key, value, min, max);                                        \
    if (!v.ok()) return v.status();                                                       \
    p->field = static_cast<type>(*v);                                                     \
    return absl::OkStatus();                                                              \
  }

// The JSON of a declared rollout: an object here; its fields are checked where it is applied.
absl::Status SetRollout(absl::string_view file, absl::string_view key, absl::string_view value, TideParameters* p) {
  const std::string_view v(value.data(), value.size());
  const size_t first = v.find_first_not_of(" \t\r\n");
  const size_t last = v.find_last_not_of(" \t\r\n");
  if (first == std::string_view::npos || v[first] != '{' || v[last] != '}') {
    return ParamError(file, key, "must be a JSON object (the body of PUT /v2/models/{m}/rollout)");
  }
  p->rollout = std::string(v.substr(first, last - first + 1));
  return absl::OkStatus();
}

absl::Status SetTokenizer(absl::string_view file, absl::string_view key, absl::string_view value,
                          TideParameters* p) {
  if (value.empty()) return ParamError(file, key, "must name a file");
  std::filesystem::path path{std::string(value)};
  bool escapes = path.is_absolute() || path.has_root_name();
  for (const auto& part : path) escapes = escapes || part == "..";
  if (escapes) return ParamError(file, key, "must be a file name relative to the model directory");
  p->tokenizer = std::string(value);
  return absl::OkStatus();
}

// "16,32,64": strictly increasing integers in [1, max].
absl::StatusOr<std::vector<int64_t>> ParseIncreasingList(absl::string_view file, absl::string_view key,
                                                         absl::string_view value, int64_t max,
                                                         absl::string_view what) {
  std::vector<int64_t> sizes;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    auto v = ParseInt(file, key, absl::StripAsciiWhitespace(part), 1, max);
    if (!v.ok()) return v.status();
    if (!sizes.empty() && *v <= sizes.back()) {
      return ParamError(file, key, absl::StrCat(what, " must be strictly increasing"));
    }
    sizes.push_back(*v);
  }
  return sizes;
}

absl::Status SetSequenceBuckets(absl::string_view file, absl::string_view key, absl::string_view value,
                                TideParameters* p) {
  auto v = ParseIncreasingList(file, key, value, kMaxSequenceLengthLimit, "bucket lengths");
  if (!v.ok()) return v.status();
  p->sequence_buckets = *std::move(v);
  return absl::OkStatus();
}

absl::Status SetAllowedBatchSizes(absl::string_view file, absl::string_view key, absl::string_view value,
                                  TideParameters* p) {
  auto v = ParseIncreasingList(file, key, value, int64_t{1} << 20, "batch sizes");
  if (!v.ok()) return v.status();
  p->allowed_batch_sizes = *std::move(v);
  return absl::OkStatus();
}

// A number in [0, 1].
absl::StatusOr<double> ParseFraction(absl::string_view file, absl::string_view key, absl::string_view value) {
  double v = 0;
  if (!absl::SimpleAtod(value, &v) || !(v >= 0.0 && v <= 1.0)) {
    return ParamError(file, key, absl::StrCat("expected a number in [0, 1], got \"", value, "\""));
  }
  return v;
}

absl::Status SetBreakerErrorRate(absl::string_view file, absl::string_view key, absl::string_view value,
                                 TideParameters* p) {
  auto v = ParseFraction(file, key, value);
  if (!v.ok()) return v.status();
  p->breaker_error_rate = *v;
  return absl::OkStatus();
}

absl::Status SetBreakerQueueFullness(absl::string_view file, absl::string_view key, absl::string_view value,
                                     TideParameters* p) {
  auto v = ParseFraction(file, key, value);
  if (!v.ok()) return v.status();
  p->breaker_queue_fullness = *v;
  return absl::OkStatus();
}

absl::Status SetMaxPaddingRatio(absl::string_view file, absl::string_view key, absl::string_view value,
                                TideParameters* p) {
  double v = 0;
  if (!absl::SimpleAtod(value, &v) || !(v == 0.0 || (v >= 1.0 && v <= 1024.0))) {
    return ParamError(file, key, absl::StrCat("expected 0 (no limit) or a number in [1, 1024], got \"", value, "\""));
  }
  p->max_padding_ratio = v;
  return absl::OkStatus();
}

absl::Status SetBreakerDefaultResult(absl::string_view file, absl::string_view key, absl::string_view value,
                                     TideParameters* p) {
  auto v = ParseDefaultResult(file, key, value);
  if (!v.ok()) return v.status();
  p->breaker_default_result = *std::move(v);
  return absl::OkStatus();
}

absl::Status SetPromptTemplate(absl::string_view file, absl::string_view key, absl::string_view value,
                               TideParameters* p) {
  std::string error;
  std::optional<PromptTemplate> parsed = PromptTemplate::Parse(std::string_view(value.data(), value.size()), &error);
  if (!parsed.has_value()) return ParamError(file, key, error);
  p->prompt_template = *std::move(parsed);
  return absl::OkStatus();
}

absl::Status SetDefaultInstruction(absl::string_view file, absl::string_view key, absl::string_view value,
                                   TideParameters* p) {
  p->default_instruction = std::string(value);
  return absl::OkStatus();
}

// "64,128,256": strictly increasing positive dimensions.
absl::Status SetMatryoshkaDimensions(absl::string_view file, absl::string_view key, absl::string_view value,
                                     TideParameters* p) {
  std::vector<int64_t> dims;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &d) || d < 1 || d > (int64_t{1} << 20)) {
      return ParamError(file, key, absl::StrCat("expected positive integers like \"64,128,256\", got \"", value, "\""));
    }
    if (!dims.empty() && d <= dims.back()) {
      return ParamError(file, key, absl::StrCat("dimensions must be strictly increasing, got \"", value, "\""));
    }
    dims.push_back(d);
  }
  p->matryoshka_dimensions = std::move(dims);
  return absl::OkStatus();
}

// {"query": "query: ", ...}: names to prefixes.
absl::Status SetPrompts(absl::string_view file, absl::string_view key, absl::string_view value, TideParameters* p) {
  nlohmann::json d = nlohmann::json::parse(value.begin(), value.end(), nullptr, /*allow_exceptions=*/false);
  if (!d.is_object()) {
    return ParamError(file, key, "expected a JSON object of prompt names to prefixes, e.g. {\"query\": \"query: \"}");
  }
  std::vector<std::pair<std::string, std::string>> prompts;
  for (const auto& [name, prefix] : d.items()) {
    if (!prefix.is_string() || name.empty()) {
      return ParamError(file, key, absl::StrCat("prompt \"", name, "\" must be a non-empty name with a string prefix"));
    }
    prompts.emplace_back(name, prefix.get<std::string>());
  }
  p->prompts = std::move(prompts);  // nlohmann's object keeps its keys sorted
  return absl::OkStatus();
}

absl::Status SetDefaultPromptName(absl::string_view file, absl::string_view key, absl::string_view value,
                                  TideParameters* p) {
  p->default_prompt_name = std::string(value);
  return absl::OkStatus();
}

// The two *_thread_count aliases are the names Triton's ONNX Runtime backend uses, so its configs load.
const ParameterKey kKeys[] = {
    {"task", TIDE_CHOICE(task, kTasks)},
    {"tokenizer", SetTokenizer},
    {"max_sequence_length", TIDE_INT(max_sequence_length, int64_t, 2, kMaxSequenceLengthLimit)},
    {"truncation_direction", TIDE_CHOICE(truncation_direction, kDirections)},
    {"score_activation", TIDE_CHOICE(score_activation, kActivations)},
    {"intra_op_threads", TIDE_INT(intra_op_threads, int, 0, kMaxThreads)},
    {"intra_op_thread_count", TIDE_INT(intra_op_threads, int, 0, kMaxThreads)},
    {"inter_op_threads", TIDE_INT(inter_op_threads, int, 0, kMaxThreads)},
    {"inter_op_thread_count", TIDE_INT(inter_op_threads, int, 0, kMaxThreads)},
    {"allow_spinning", TIDE_BOOL(allow_spinning)},
    {"thread_layout", TIDE_CHOICE(thread_layout, kThreadLayouts)},
    {"graph_optimization_level", TIDE_CHOICE(graph_optimization_level, kLevels)},
    {"enable_cpu_mem_arena", TIDE_BOOL(enable_cpu_mem_arena)},
    {"share_weights", TIDE_BOOL(share_weights)},
    {"weights_file", TIDE_BOOL(weights_file)},
    {"max_batch_tokens", TIDE_INT(max_batch_tokens, int64_t, 16, int64_t{1} << 24)},
    {"batch_saturation_tokens", TIDE_INT(batch_saturation_tokens, int64_t, 0, int64_t{1} << 24)},
    {"sequence_buckets", SetSequenceBuckets},
    {"allowed_batch_sizes", SetAllowedBatchSizes},
    {"batch_grouping", TIDE_CHOICE(batch_grouping, kGroupings)},
    {"batch_padding", TIDE_CHOICE(batch_padding, kPaddings)},
    {"graph_fusion", TIDE_CHOICE(graph_fusion, kFusions)},
    {"attention_kernel", TIDE_CHOICE(attention_kernel, kKernelChoices)},
    {"elementwise_kernel", TIDE_CHOICE(elementwise_kernel, kKernelChoices)},
    {"attention_precision", TIDE_CHOICE(attention_precision, kAttentionPrecisions)},
    {"prune_last_layer", TIDE_BOOL(prune_last_layer)},
    {"shared_prompt_prefix", TIDE_BOOL(shared_prompt_prefix)},
    {"max_padding_ratio", SetMaxPaddingRatio},
    {"token_type_vocab_size", TIDE_INT(token_type_vocab_size, int64_t, 1, int64_t{1} << 20)},
    {"long_documents", TIDE_CHOICE(long_documents, kLongDocuments)},
    {"chunk_tokens", TIDE_INT(chunk_tokens, int64_t, 0, kMaxSequenceLengthLimit)},
    {"chunk_stride", TIDE_INT(chunk_stride, int64_t, 0, kMaxSequenceLengthLimit)},
    {"max_chunks_per_document", TIDE_INT(max_chunks_per_document, int64_t, 1, 4096)},
    {"breaker_p99_ms", TIDE_INT(breaker_p99_ms, int64_t, 0, int64_t{1} << 32)},
    {"breaker_error_rate", SetBreakerErrorRate},
    {"breaker_queue_fullness", SetBreakerQueueFullness},
    {"breaker_window_s", TIDE_INT(breaker_window_s, int64_t, 1, 86400)},
    {"breaker_min_samples", TIDE_INT(breaker_min_samples, int64_t, 1, int64_t{1} << 24)},
    {"breaker_open_s", TIDE_INT(breaker_open_s, int64_t, 1, 86400)},
    {"breaker_probes", TIDE_INT(breaker_probes, int64_t, 1, 86400)},
    {"breaker_default_result", SetBreakerDefaultResult},
    {"rollout", SetRollout},
    {"prompt_template", SetPromptTemplate},
    {"default_instruction", SetDefaultInstruction},
    {"pooling", TIDE_CHOICE(pooling, kPoolings)},
    {"normalize", TIDE_BOOL(normalize)},
    {"matryoshka_dimensions", SetMatryoshkaDimensions},
    {"prompts", SetPrompts},
    {"default_prompt_name", SetDefaultPromptName},
};

#undef TIDE_CHOICE
#undef TIDE_BOOL
#undef TIDE_INT

std::string KnownKeys() {
  std::string out;
  for (const ParameterKey& k : kKeys) absl::StrAppend(&out, out.empty() ? "" : ", ", AbslView(k.name));
  return out;
}

}  // namespace

std::vector<std::string_view> TideParameters::Keys() {
  std::vector<std::string_view> keys;
  for (const ParameterKey& k : kKeys) keys.push_back(k.name);
  return keys;
}

absl::StatusOr<TideParameters> TideParameters::FromConfig(const ModelConfig& config,
                                                          std::string_view file_in) {
  const absl::string_view file = AbslView(file_in);
  TideParameters p;
  // Sorted keys, so that with several bad keys the error is deterministic.
  std::map<std::string, std::string> params;
  for (const auto& [key, value] : config.parameters()) params[key] = value.string_value();
  for (const auto& [key, value] : params) {
    const ParameterKey* entry = nullptr;
    for (const ParameterKey& k : kKeys) {
      if (k.name == key) entry = &k;
    }
    if (entry == nullptr) {
      return ParamError(file, key, absl::StrCat("unknown parameter (tide knows ", KnownKeys(), ")"));
    }
    TIDE_RETURN_IF_ERROR(entry->set(file, key, value, &p));
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
  if (p.task != Task::kEmbed) {
    for (const char* key : {"pooling", "normalize", "matryoshka_dimensions", "prompts", "default_prompt_name"}) {
      if (params.count(key) != 0) {
        return ParamError(file, key, absl::StrCat("applies to task \"embed\" only (this model's task is \"",
                                                  AbslView(TaskName(p.task)), "\")"));
      }
    }
  }
  if (p.default_prompt_name.has_value() && p.Prompt(*p.default_prompt_name) == nullptr) {
    return ParamError(file, "default_prompt_name",
                      absl::StrCat("\"", *p.default_prompt_name, "\" is not one of the model's prompts"));
  }
  if (p.default_instruction.has_value()) {
    if (!p.prompt_template.has_value()) {
      return ParamError(file, "default_instruction", "needs a prompt_template with an {instruction} slot");
    }
    if (!p.prompt_template->has_instruction()) {
      return ParamError(file, "default_instruction",
                        "the prompt_template has no {instruction} slot to put it in");
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

std::string_view PoolingName(Pooling pooling) {
  for (const auto& [name, v] : kPoolings) if (v == pooling) return name;
  return "?";
}

std::string_view ScoreActivationName(ScoreActivation activation) {
  for (const auto& [name, a] : kActivations) if (a == activation) return name;
  return "?";
}

}  // namespace tide::config
