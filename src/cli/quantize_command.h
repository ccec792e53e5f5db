// `tide quantize`: rewrite an FP32 ONNX model as dynamic INT8 or FP16, in C++ (no Python).
//
//   tide quantize --int8 IN.onnx OUT.onnx [--per-channel] [--reduce-range] [--format contrib|onnx]
//                 [--include REGEX]... [--exclude REGEX]... [--quantize-head] [--external-data auto|always|never]
//   tide quantize --fp16 IN.onnx OUT.onnx [--fp16-mode matmul|weights] [--include/--exclude ...]
//
// Prints the converted and skipped nodes and the weight bytes before and after to `out`.
// Exit codes: 0 written; 2 the model cannot be read, is already quantized, has nothing to
// quantize, or cannot be written (the message says which). Every flag has an environment twin
// TIDE_QUANTIZE_*.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "onnx_graph/model_io.h"
#include "quantize/fp16_converter.h"
#include "quantize/int8_quantizer.h"

namespace tide::cli {

struct QuantizeCommandOptions {
  std::string input;
  std::string output;
  bool int8 = false;
  bool fp16 = false;
  quantize::Int8Options int8_options;
  quantize::Fp16Options fp16_options;
  onnx_graph::SaveOptions save_options;
  bool verbose = false;  // list every node, not only counts
};

// Loads, rewrites and writes the model; writes a report to `out`.
absl::Status RunQuantize(const QuantizeCommandOptions& options, std::ostream& out);

void RegisterQuantizeCommand(CLI::App* app);

}  // namespace tide::cli
