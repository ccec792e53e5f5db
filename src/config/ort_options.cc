#include "config/ort_options.h"

#include <memory>

#include "runtime/shared_weights.h"

namespace tide::config {

runtime::OrtOptions MakeOrtOptions(const TideParameters& params, const std::filesystem::path& model_file) {
  runtime::OrtOptions o;
  o.model_path = model_file.string();
  o.intra_op_threads = params.intra_op_threads;
  o.inter_op_threads = params.inter_op_threads;
  o.allow_spinning = params.allow_spinning;
  o.enable_cpu_mem_arena = params.enable_cpu_mem_arena;
  // One SharedWeights per call: per loaded model version, held by that version's instances.
  if (params.share_weights) o.shared_weights = std::make_shared<runtime::SharedWeights>();
  switch (params.graph_optimization_level) {
    case GraphOptimizationLevel::kDisable: o.graph_optimization_level = runtime::GraphOptimization::kDisable; break;
    case GraphOptimizationLevel::kBasic: o.graph_optimization_level = runtime::GraphOptimization::kBasic; break;
    case GraphOptimizationLevel::kExtended: o.graph_optimization_level = runtime::GraphOptimization::kExtended; break;
    case GraphOptimizationLevel::kAll: o.graph_optimization_level = runtime::GraphOptimization::kAll; break;
  }
  return o;
}

}  // namespace tide::config
