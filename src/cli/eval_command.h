// `tide eval`: fidelity and speed of quantized model variants against their FP32 original.
//
//   tide eval --model FP32.onnx --variant int8=INT8.onnx [--variant fp16=FP16.onnx ...]
//             [--queries 40] [--min-docs 16] [--max-docs 100] [--batch 16] [--threads 1] [--seed 1]
//
// Builds a fixed, seeded set of rerank requests — `queries` queries, each with a uniform number of
// documents in [min-docs, max-docs]; query and document lengths follow the SciFact shape measured
// with the bert-base-uncased tokenizer (queries ~21 tokens, documents ~335, long tail truncated to
// max-length) — as random token ids in a BERT pair layout ([CLS] q [SEP] d [SEP]). Token ids are
// random, not text: the numbers measure how far a variant's scores move from FP32 on the model's
// own input space, not retrieval quality.
// For each variant and query: max and mean |score - fp32 score|, Spearman rho, Kendall tau-b,
// top-1 agreement, top-10 overlap, and NDCG@10 of the variant's ranking judged by the FP32 ranking
// (gain 10 - r for the FP32 rank r < 10, else 0). Next to them: pairs/s over the whole set, p50
// batch latency, file size, and resident memory added by creating the session and running one
// batch. Each batch runs on every model in turn (interleaved), so load from other processes falls
// on all variants alike. Writes a Markdown table.
// A --served-variant runs as `tide serve` runs it (graph_fusion auto): fused at load with tide's
// kernels where this CPU runs them (serving::LoadFusionOptions), its attention precision auto
// (BF16 products for an INT8 model with AVX512_BF16) unless --attention-precision LABEL=fp32|bf16
// names it, and its last layer on the pooled token (prune_last_layer) unless --whole-last-layer
// LABEL names it; its row says how it was fused. --variant runs the file as it is.
// Exit codes: 0 done, 2 a model cannot be loaded, fused or run. Flags have TIDE_EVAL_* twins.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

namespace tide::cli {

struct EvalOptions {
  std::string model;                                      // the FP32 reference
  std::vector<std::pair<std::string, std::string>> variants;  // label, path
  std::vector<std::pair<std::string, std::string>> served_variants;  // label, path: fused as tide serve fuses
  std::vector<std::pair<std::string, std::string>> attention_precision;  // served label, auto|fp32|bf16
  std::vector<std::string> whole_last_layer;  // served labels run with prune_last_layer false
  int queries = 40;
  int min_docs = 16;
  int max_docs = 100;
  int batch = 16;             // documents per Run
  int max_length = 512;       // pair length after truncation
  int64_t vocab = 30522;      // token ids are drawn below this (bert-base-uncased vocabulary)
  int intra_op_threads = 1;
  uint32_t seed = 1;
};

absl::Status RunEval(const EvalOptions& options, std::ostream& out);

void RegisterEvalCommand(CLI::App* app);

}  // namespace tide::cli
