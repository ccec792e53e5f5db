// tide — Transformer Inference Deployment Engine. One binary, one subcommand per task:
//   tide serve         run the inference server over a model repository
//   tide tokenize      tokenize JSON lines with a tokenizer.json (debugging, parity checks)
//   tide verify-model  compare ONNX Runtime outputs of a model against reference logits
//   tide bench         load generator: latency/throughput of a running server
//   tide quantize      rewrite an FP32 model as dynamic INT8 or FP16
//   tide eval          fidelity and speed of quantized variants against the FP32 model
//   tide optimize      fuse attention and skip-layernorm into ONNX Runtime contrib operators
#include <cstdio>

#include "CLI/CLI.hpp"

#ifdef TIDE_HAVE_TOKENIZE_COMMAND
#include "cli/tokenize_command.h"
#endif
#ifdef TIDE_HAVE_VERIFY_COMMAND
#include "cli/verify_model_command.h"
#endif
#ifdef TIDE_HAVE_SERVE_COMMAND
#include "cli/serve_command.h"
#endif

#ifdef TIDE_HAVE_QUANTIZE_COMMAND
#include "cli/quantize_command.h"
#endif
#ifdef TIDE_HAVE_EVAL_COMMAND
#include "cli/eval_command.h"
#endif

#ifdef TIDE_HAVE_OPTIMIZE_COMMAND
#include "cli/optimize_command.h"
#endif

#ifdef TIDE_HAVE_BENCH_COMMAND
#include "cli/bench_command.h"
#endif

int main(int argc, char** argv) {
  CLI::App app{"tide: a transformer inference server for cross-encoder rerankers", "tide"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tide 0.1.0");
#ifdef TIDE_HAVE_SERVE_COMMAND
  tide::cli::RegisterServeCommand(&app);
#endif
#ifdef TIDE_HAVE_TOKENIZE_COMMAND
  tide::cli::RegisterTokenizeCommand(&app);
#endif
#ifdef TIDE_HAVE_VERIFY_COMMAND
  tide::cli::RegisterVerifyModelCommand(&app);
#endif
#ifdef TIDE_HAVE_QUANTIZE_COMMAND
  tide::cli::RegisterQuantizeCommand(&app);
#endif
#ifdef TIDE_HAVE_EVAL_COMMAND
  tide::cli::RegisterEvalCommand(&app);
#endif
#ifdef TIDE_HAVE_BENCH_COMMAND
  tide::cli::RegisterBenchCommand(&app);
#endif
#ifdef TIDE_HAVE_OPTIMIZE_COMMAND
  tide::cli::RegisterOptimizeCommand(&app);
#endif
  CLI11_PARSE(app, argc, argv);
  return 0;
}
