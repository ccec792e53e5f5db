// `tide optimize`: fuse a transformer model's attention and skip-layernorm subgraphs into ONNX
// Runtime contrib operators (src/optimize/transformer_fusion.h), in C++ (no Python).
//
//   tide optimize IN.onnx OUT.onnx [--no-attention] [--no-skip-layernorm] [--no-check] [--verbose]
//
// Prints what was fused and why other candidates were left alone; unless --no-check, runs a padded
// probe batch through the fused and the original model with ONNX Runtime and prints the largest
// logit difference (exit 2 when it exceeds 1e-3 x the logit scale; the output is not written).
// Exit codes: 0 written; 2 the model cannot be read, is already fused, nothing matched, the check
// failed, or the output cannot be written. Every flag has an environment twin TIDE_OPTIMIZE_*.
#pragma once

#include <ostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "optimize/transformer_fusion.h"

namespace tide::cli {

struct OptimizeCommandOptions {
  std::string input;
  std::string output;
  optimize::FusionOptions fusion;
  bool check = true;     // compare fused and original logits on a probe batch before writing
  bool verbose = false;  // list every skipped candidate, not only their count
};

absl::Status RunOptimize(const OptimizeCommandOptions& options, std::ostream& out);

void RegisterOptimizeCommand(CLI::App* app);

}  // namespace tide::cli
