#include "serving/ort_options.h"

#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "runtime/shared_weights.h"

namespace tide::serving {

using runtime::AloneSessionSlot;
using runtime::GraphOptimization;
using runtime::OrtOptions;
using runtime::SharedWeights;

OrtOptions MakeOrtOptions(const config::TideParameters& params, const std::filesystem::path& model_file,
                          int instances) {
  OrtOptions o;
  o.model_path = model_file.string();
  o.intra_op_threads = params.intra_op_threads;
  o.inter_op_threads = params.inter_op_threads;
  o.allow_spinning = params.allow_spinning;
  // intra_op_threads 0 is ONNX Runtime's default, every core already: nothing to widen.
  if (params.thread_layout == config::ThreadLayout::kAdaptive && params.intra_op_threads > 0 && instances > 1) {
    o.alone_intra_op_threads = params.intra_op_threads * instances;
    o.alone_session = std::make_shared<AloneSessionSlot>();  // one wider session for the version's instances
  }
  o.enable_cpu_mem_arena = params.enable_cpu_mem_arena;
  // One SharedWeights per call: per loaded model version, held by that version's instances; its
  // weights in an unnamed file in the temp directory (TMPDIR, else /tmp), as the fused model's.
  if (params.share_weights) {
    std::string dir;
    if (params.weights_file) {
      std::error_code ec;
      const std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
      dir = ec ? std::string("/tmp") : tmp.string();
    }
    o.shared_weights = std::make_shared<SharedWeights>(std::move(dir));
  }
  switch (params.graph_optimization_level) {
    case config::GraphOptimizationLevel::kDisable: o.graph_optimization_level = GraphOptimization::kDisable; break;
    case config::GraphOptimizationLevel::kBasic: o.graph_optimization_level = GraphOptimization::kBasic; break;
    case config::GraphOptimizationLevel::kExtended: o.graph_optimization_level = GraphOptimization::kExtended; break;
    case config::GraphOptimizationLevel::kAll: o.graph_optimization_level = GraphOptimization::kAll; break;
  }
  return o;
}

}  // namespace tide::serving
