#include "cli/quantize_command.h"

#include <filesystem>
#include <iostream>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tide::cli {

absl::Status RunQuantize(const QuantizeCommandOptions& options, std::ostream& out) {
  if (options.int8 == options.fp16) return absl::InvalidArgumentError("choose exactly one of --int8 and --fp16");
  if (std::filesystem::weakly_canonical(options.input) == std::filesystem::weakly_canonical(options.output)) {
    return absl::InvalidArgumentError("the output must not overwrite the input model");
  }
  absl::StatusOr<onnx::ModelProto> model = onnx_graph::LoadModel(options.input);
  if (!model.ok()) return model.status();
  absl::StatusOr<quantize::QuantizeReport> report =
      options.int8 ? quantize::QuantizeInt8(options.int8_options, &*model)
                   : quantize::ConvertFp16(options.fp16_options, &*model);
  if (!report.ok()) return absl::Status(report.status().code(), absl::StrCat(options.input, ": ", report.status().message()));
  if (absl::Status s = onnx_graph::SaveModel(*model, options.output, options.save_options); !s.ok()) return s;

  std::string what;
  if (options.int8) {
    const auto& o = options.int8_options;
    what = absl::StrCat("int8 (", o.per_channel ? "per-channel" : "per-tensor", o.reduce_range ? ", 7-bit" : "", ", ",
                        o.op_format == quantize::Int8OpFormat::kDynamicQuantizeMatMul ? "com.microsoft.DynamicQuantizeMatMul"
                                                                                     : "MatMulInteger",
                        ")");
  } else {
    what = options.fp16_options.mode == quantize::Fp16Mode::kMatMul ? "fp16 (MatMul compute)" : "fp16 (weights only)";
  }
  out << absl::StrFormat("tide quantize: %s -> %s, %s: %d nodes converted, %d skipped; weights %.1f MB -> %.1f MB\n",
                         options.input, options.output, what, report->converted_nodes.size(),
                         report->skipped_nodes.size(), report->weight_bytes_before / 1e6,
                         report->weight_bytes_after / 1e6);
  for (const auto& s : report->skipped_nodes) out << "  skipped " << s << "\n";
  if (options.verbose) {
    for (const auto& n : report->converted_nodes) out << "  converted " << n << "\n";
  }
  return absl::OkStatus();
}

void RegisterQuantizeCommand(CLI::App* app) {
  auto options = std::make_shared<QuantizeCommandOptions>();
  CLI::App* cmd = app->add_subcommand("quantize", "rewrite an FP32 ONNX model as dynamic INT8 or FP16 (no Python needed)");
  cmd->add_option("input", options->input, "the FP32 .onnx model")->required()->check(CLI::ExistingFile)->envname("TIDE_QUANTIZE_INPUT");
  cmd->add_option("output", options->output, "where to write the rewritten model")->required()->envname("TIDE_QUANTIZE_OUTPUT");
  auto* int8 = cmd->add_flag("--int8", options->int8, "dynamic INT8: int8 weights, uint8 activations quantized at run time")
                   ->envname("TIDE_QUANTIZE_INT8");
  auto* fp16 = cmd->add_flag("--fp16", options->fp16, "float16 weights (for GPU providers)")->envname("TIDE_QUANTIZE_FP16");
  int8->excludes(fp16);
  cmd->add_flag("--per-channel", options->int8_options.per_channel, "one weight scale per output column (default: per tensor)")
      ->envname("TIDE_QUANTIZE_PER_CHANNEL");
  cmd->add_flag("--reduce-range", options->int8_options.reduce_range,
                "7-bit weights: avoids int16 saturation in u8s8 kernels on CPUs without VNNI")
      ->envname("TIDE_QUANTIZE_REDUCE_RANGE");
  cmd->add_flag("--share-input-quantization", options->int8_options.share_input_quantization,
                "MatMuls reading one activation (Q, K, V) share one DynamicQuantizeLinear (MatMulIntegerToFloat each)")
      ->envname("TIDE_QUANTIZE_SHARE_INPUT_QUANTIZATION");
  static const std::map<std::string, quantize::Int8OpFormat> kFormats = {
      {"contrib", quantize::Int8OpFormat::kDynamicQuantizeMatMul}, {"onnx", quantize::Int8OpFormat::kMatMulInteger}};
  cmd->add_option("--format", options->int8_options.op_format,
                  "int8 operators: contrib (com.microsoft DynamicQuantizeMatMul, ONNX Runtime) or onnx "
                  "(DynamicQuantizeLinear + MatMulInteger, standard ONNX)")
      ->transform(CLI::CheckedTransformer(kFormats))->envname("TIDE_QUANTIZE_FORMAT");
  static const std::map<std::string, quantize::Fp16Mode> kModes = {{"matmul", quantize::Fp16Mode::kMatMul},
                                                                   {"weights", quantize::Fp16Mode::kWeightsOnly}};
  cmd->add_option("--fp16-mode", options->fp16_options.mode,
                  "matmul: MatMuls compute in float16 between casts (GPU); weights: float16 storage, float32 compute")
      ->transform(CLI::CheckedTransformer(kModes))->envname("TIDE_QUANTIZE_FP16_MODE");
  auto include = std::make_shared<std::vector<std::string>>();
  auto exclude = std::make_shared<std::vector<std::string>>();
  auto head = std::make_shared<bool>(false);
  cmd->add_option("--include", *include, "only nodes whose name or weight name matches this regex (repeatable)")
      ->allow_extra_args(false)->envname("TIDE_QUANTIZE_INCLUDE");
  cmd->add_option("--exclude", *exclude, "also leave nodes matching this regex in FP32 (repeatable)")
      ->allow_extra_args(false)->envname("TIDE_QUANTIZE_EXCLUDE");
  cmd->add_flag("--quantize-head", *head, "convert the classifier head too (default: classifier/pooler/score stay FP32)")
      ->envname("TIDE_QUANTIZE_HEAD");
  static const std::map<std::string, onnx_graph::ExternalData> kExternal = {
      {"auto", onnx_graph::ExternalData::kAuto}, {"always", onnx_graph::ExternalData::kAlways}, {"never", onnx_graph::ExternalData::kNever}};
  cmd->add_option("--external-data", options->save_options.external_data,
                  "weights in OUT.data beside the model: auto (only over ~1.8 GB), always, never")
      ->transform(CLI::CheckedTransformer(kExternal))->envname("TIDE_QUANTIZE_EXTERNAL_DATA");
  cmd->add_flag("--verbose", options->verbose, "list every converted node")->envname("TIDE_QUANTIZE_VERBOSE");
  cmd->callback([options, include, exclude, head] {
    std::vector<std::string> excl = *head ? std::vector<std::string>{} : quantize::Int8Options{}.exclude_patterns;
    excl.insert(excl.end(), exclude->begin(), exclude->end());
    options->int8_options.include_patterns = *include;
    options->int8_options.exclude_patterns = excl;
    options->fp16_options.include_patterns = *include;
    options->fp16_options.exclude_patterns = excl;
    if (absl::Status s = RunQuantize(*options, std::cout); !s.ok()) {
      std::cerr << "tide quantize: " << s.message() << "\n";
      throw CLI::RuntimeError(2);
    }
  });
}

}  // namespace tide::cli
