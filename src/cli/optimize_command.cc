#include "cli/optimize_command.h"

#include <filesystem>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "onnx_graph/model_io.h"
#include "optimize/fusion_check.h"
#include "runtime/ort_backend.h"

namespace tide::cli {

absl::Status RunOptimize(const OptimizeCommandOptions& options, std::ostream& out) {
  if (std::filesystem::weakly_canonical(options.input) == std::filesystem::weakly_canonical(options.output)) {
    return absl::InvalidArgumentError("the output must not overwrite the input model");
  }
  absl::StatusOr<onnx::ModelProto> model = onnx_graph::LoadModel(options.input);
  if (!model.ok()) return model.status();
  absl::StatusOr<optimize::FusionReport> report = optimize::FuseTransformer(options.fusion, &*model);
  if (!report.ok()) return absl::Status(report.status().code(), absl::StrCat(options.input, ": ", report.status().message()));
  out << absl::StrFormat("tide optimize: %s: fused %s; %d candidate(s) left alone\n", options.input, report->Summary(),
                         report->skipped.size());
  const size_t shown = options.verbose ? report->skipped.size() : std::min<size_t>(report->skipped.size(), 5);
  for (size_t i = 0; i < shown; ++i) out << "  skipped " << report->skipped[i] << "\n";
  if (shown < report->skipped.size()) out << "  ... (--verbose lists all)\n";
  if (report->fused() == 0) return absl::FailedPreconditionError("nothing matched; no output written");

  if (options.check) {
    auto signature = runtime::OrtBackend::ReadSignature(options.input);
    if (!signature.ok()) return signature.status();
    runtime::OrtOptions original;
    original.model_path = options.input;
    original.intra_op_threads = 1;
    runtime::OrtOptions fused = original;
    fused.model_path.clear();
    if (!model->SerializeToString(&fused.model_data)) {
      return absl::InternalError("the fused model is too large for one buffer; use --no-check");
    }
    // Ids below 100 exist in every vocabulary; the CLI has no tokenizer to ask.
    const runtime::TokenBatch probe = optimize::ProbeBatch(*signature, 100, 24);
    const bool quantized = optimize::IsDynamicallyQuantized(*model);
    auto cmp = optimize::CompareOnProbe(original, fused, probe, quantized);
    if (!cmp.ok()) return cmp.status();
    out << absl::StrFormat("  check: max |fused - original| = %.3g on a padded %dx%d probe batch (limit %.3g%s)\n",
                           cmp->max_abs_diff, probe.batch, probe.seq_len, cmp->tolerance, quantized ? ", INT8" : "");
    if (!cmp->ok()) return absl::InternalError("the fused model does not reproduce the original logits; no output written");
  }
  if (absl::Status s = onnx_graph::SaveModel(*model, options.output); !s.ok()) return s;
  out << "  wrote " << options.output << "\n";
  return absl::OkStatus();
}

void RegisterOptimizeCommand(CLI::App* app) {
  auto options = std::make_shared<OptimizeCommandOptions>();
  CLI::App* cmd = app->add_subcommand(
      "optimize", "fuse attention and skip-layernorm into ONNX Runtime contrib operators (FP32 or INT8 models)");
  cmd->add_option("input", options->input, "the .onnx model")->required()->check(CLI::ExistingFile)->envname("TIDE_OPTIMIZE_INPUT");
  cmd->add_option("output", options->output, "where to write the fused model")->required()->envname("TIDE_OPTIMIZE_OUTPUT");
  auto no_attention = std::make_shared<bool>(false);
  auto no_skip = std::make_shared<bool>(false);
  auto no_check = std::make_shared<bool>(false);
  cmd->add_flag("--no-attention", *no_attention, "leave attention unfused")->envname("TIDE_OPTIMIZE_NO_ATTENTION");
  cmd->add_flag("--no-skip-layernorm", *no_skip, "leave Add + LayerNormalization unfused")
      ->envname("TIDE_OPTIMIZE_NO_SKIP_LAYERNORM");
  cmd->add_flag("--no-check", *no_check, "write without comparing fused and original logits")->envname("TIDE_OPTIMIZE_NO_CHECK");
  cmd->add_flag("--verbose", options->verbose, "list every candidate left alone")->envname("TIDE_OPTIMIZE_VERBOSE");
  cmd->callback([options, no_attention, no_skip, no_check] {
    options->fusion.attention = !*no_attention;
    options->fusion.skip_layer_norm = !*no_skip;
    options->check = !*no_check;
    if (absl::Status s = RunOptimize(*options, std::cout); !s.ok()) {
      std::cerr << "tide optimize: " << s.message() << "\n";
      throw CLI::RuntimeError(2);
    }
  });
}

}  // namespace tide::cli
