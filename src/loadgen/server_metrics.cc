#include "loadgen/server_metrics.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tide::loadgen {
namespace {

constexpr absl::string_view kFamily = "tide_stage_duration_seconds";

// The value of label `name` in a {a="x",b="y"} block; "" when absent.
std::string LabelValue(absl::string_view labels, absl::string_view name) {
  const std::string key = std::string(name) + "=\"";
  size_t pos = 0;
  while ((pos = labels.find(key, pos)) != absl::string_view::npos) {
    if (pos == 0 || labels[pos - 1] == '{' || labels[pos - 1] == ',') {
      size_t begin = pos + key.size();
      size_t end = labels.find('"', begin);
      if (end == absl::string_view::npos) return "";
      return std::string(labels.substr(begin, end - begin));
    }
    pos += key.size();
  }
  return "";
}

int StageOrder(const std::string& stage) {
  static const char* kOrder[] = {"tokenize", "queue", "inference", "postprocess"};
  for (int i = 0; i < 4; ++i)
    if (stage == kOrder[i]) return i;
  return 4;
}

}  // namespace

StageTotals ParseStageTotals(std::string_view std_text) {
  const absl::string_view text(std_text.data(), std_text.size());
  StageTotals totals;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, kFamily)) continue;
    bool is_sum = absl::ConsumePrefix(&line, "_sum");
    bool is_count = !is_sum && absl::ConsumePrefix(&line, "_count");
    if (!is_sum && !is_count) continue;
    if (line.empty() || line.front() != '{') continue;
    size_t close = line.find('}');
    if (close == absl::string_view::npos) continue;
    std::string stage = LabelValue(line.substr(0, close + 1), "stage");
    if (stage.empty()) continue;
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(close + 1));
    value = value.substr(0, value.find(' '));  // an optional timestamp follows
    double v = 0;
    if (!absl::SimpleAtod(value, &v)) continue;
    (is_sum ? totals[stage].sum_seconds : totals[stage].count) += v;
  }
  return totals;
}

std::vector<StageSplit> DiffStageTotals(const StageTotals& before, const StageTotals& after) {
  std::vector<StageSplit> out;
  for (const auto& [stage, a] : after) {
    StageTotal b;
    if (auto it = before.find(stage); it != before.end()) b = it->second;
    const double count = a.count - b.count;
    if (count <= 0) continue;
    out.push_back({stage, count, (a.sum_seconds - b.sum_seconds) / count * 1e3});
  }
  std::stable_sort(out.begin(), out.end(), [](const StageSplit& x, const StageSplit& y) {
    return StageOrder(x.stage) < StageOrder(y.stage);
  });
  return out;
}

}  // namespace tide::loadgen
