#include "api/model_statistics.h"

#include "nlohmann/json.hpp"

namespace tide::api {

std::string RenderModelStatistics(const std::vector<ModelStatistics>& models) {
  using nlohmann::json;
  auto duration = [](const DurationStat& d) { return json{{"count", d.count}, {"ns", d.ns}}; };
  const DurationStat zero;
  json out = json::array();
  for (const ModelStatistics& m : models) {
    json batch_stats = json::array();
    for (const BatchStat& b : m.batch_stats) {
      const DurationStat counted{b.compute_infer.count, 0};
      batch_stats.push_back({{"batch_size", b.batch_size},
                             {"compute_input", duration(counted)},
                             {"compute_infer", duration(b.compute_infer)},
                             {"compute_output", duration(counted)}});
    }
    out.push_back({{"name", m.name},
                   {"version", m.version},
                   {"last_inference", m.last_inference_ms},
                   {"inference_count", m.inference_count},
                   {"execution_count", m.execution_count},
                   {"inference_stats",
                    {{"success", duration(m.success)},
                     {"fail", duration(m.fail)},
                     {"queue", duration(m.queue)},
                     {"compute_input", duration(m.compute_input)},
                     {"compute_infer", duration(m.compute_infer)},
                     {"compute_output", duration(m.compute_output)},
                     {"cache_hit", duration(zero)},
                     {"cache_miss", duration(zero)}}},
                   {"response_stats", json::object()},
                   {"batch_stats", std::move(batch_stats)},
                   {"memory_usage", json::array()}});
  }
  return json{{"model_stats", std::move(out)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace tide::api
