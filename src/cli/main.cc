// tide — Transformer Inference Deployment Engine. One binary, one subcommand per task:
//   tide serve         run the inference server over a model repository
//   tide tokenize      tokenize JSON lines with a tokenizer.json (debugging, parity checks)
//   tide verify-model  compare ONNX Runtime outputs of a model against reference logits
//   tide bench         load generator: latency/throughput of a running server
//   tide quantize      rewrite an FP32 model as dynamic INT8 or FP16
//   tide eval          fidelity and speed of quantized variants against the FP32 model
//   tide optimize      fuse attention and skip-layernorm into ONNX Runtime contrib operators
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "cli/bench_command.h"
#include "cli/eval_command.h"
#include "cli/optimize_command.h"
#include "cli/quantize_command.h"
#include "cli/serve_command.h"
#include "cli/tokenize_command.h"
#include "cli/verify_model_command.h"
#include "common/version.h"

int main(int argc, char** argv) {
  CLI::App app{"tide: a transformer inference server for cross-encoder rerankers", "tide"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tide " + std::string(tide::Version()));
  tide::cli::RegisterServeCommand(&app);
  tide::cli::RegisterTokenizeCommand(&app);
  tide::cli::RegisterVerifyModelCommand(&app);
  tide::cli::RegisterQuantizeCommand(&app);
  tide::cli::RegisterEvalCommand(&app);
  tide::cli::RegisterBenchCommand(&app);
  tide::cli::RegisterOptimizeCommand(&app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
