// tide::loadgen server-side split — parses the server's Prometheus /metrics text for
// tide_stage_duration_seconds_sum / _count per stage (summed over models), before and after a
// run, and reports each stage's mean time per request during the run.
//
// Contract: pure functions, thread-safe. ParseStageTotals ignores every other family and
// malformed sample lines (a scrape is diagnostics, not a request path); it returns an empty map
// when the family is absent.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tide::loadgen {

struct StageTotal {
  double sum_seconds = 0;
  double count = 0;
};
using StageTotals = std::map<std::string, StageTotal>;  // by stage label

StageTotals ParseStageTotals(std::string_view prometheus_text);

struct StageSplit {
  std::string stage;
  double count = 0;    // observations during the run
  double mean_ms = 0;  // mean duration per observation during the run
};
// after - before for every stage present after; stages with no new observations are skipped.
// Ordered tokenize, queue, inference, postprocess, then any other stage by name.
std::vector<StageSplit> DiffStageTotals(const StageTotals& before, const StageTotals& after);

}  // namespace tide::loadgen
