// tide::serving::LoadModel — the loader: turns one version of a model repository entry into an
// immutable LoadedModel (parameters, tokenizer, signature, token-input limits, and the graph it
// will run, after graph fusion), and the backend factory that opens instances of it.
//
// Contract:
//  - LoadModel reads config parameters, tokenizer and the ONNX signature, resolves the token-input
//    limits, runs graph fusion (parameters graph_fusion = auto), computes a decoder reranker's
//    shared prompt prefix (parameter shared_prompt_prefix: serving/shared_prompt_prefix.h; into
//    ort.prompt_prefix, which every instance then uses) and validates the breaker_* parameters
//    against the signature. Errors name the file and the field. The sessions it opens (the fusion
//    probe's, the prefix's) are closed when it returns: a LoadedModel costs its tokenizer, the
//    model bytes (when fused) and the prefix's keys and values.
//  - A LoadedModel is immutable once returned (shared_ptr<const>): any number of threads may read
//    it, and a scheduler (ServedModel) keeps it alive as long as it serves.
//  - BackendFactory opens one runtime::ModelBackend per instance; OrtBackendFactory() is the
//    production one (one ONNX Runtime session over LoadedModel::ort). Tests inject fakes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "config/model_repository.h"
#include "config/tide_parameters.h"
#include "runtime/model_backend.h"
#include "runtime/ort_backend.h"
#include "runtime/shared_weights.h"
#include "runtime/unlinked_file.h"
#include "serving/token_input_limits.h"
#include "tokenizer/tokenizer.h"

namespace tide::optimize {
struct FusionOptions;  // optimize/transformer_fusion.h (a private dependency of this library)
}  // namespace tide::optimize

namespace tide::serving {

struct LoadedModel {
  std::string name;
  int64_t version = 0;
  std::string config_file;  // for error messages ("<file>: parameters[...]")
  config::ModelConfig config;
  config::TideParameters parameters;
  std::unique_ptr<const tokenizer::Tokenizer> tokenizer;  // never null
  // A hash of the tokenizer file's bytes: two versions with equal digests (and templates) encode
  // a text into the same token rows (the rollout compares KServe rows across versions only then).
  uint64_t tokenizer_digest = 0;
  ModelSignature signature;
  size_t max_sequence_length = 512;
  TokenInputLimits token_input_limits;
  // Label names in id order (a HuggingFace folder's id2label); empty: unnamed (LABEL_i).
  std::vector<std::string> labels;
  // What the model file computes in (onnx_graph::GraphPrecision): "int8" (a quantized graph, e.g.
  // `tide quantize --int8`), "fp16", "fp32"; "unknown" when the file could not be parsed.
  std::string precision = "unknown";
  // FLOPs one token costs in the graph's weight products (onnx_graph::WeightFlopsPerToken): what
  // the batcher's default saturation is derived from (DefaultBatchSaturationTokens); 0 = unknown.
  uint64_t weight_flops_per_token = 0;
  // The graph the instances run. With shared weights (the default): a skeleton in ort.model_data
  // (the model file's graph, or the fused graph) whose weights are `weights`. Without: the model
  // file, or the fused graph written to fused_file (an unnamed file in the temp directory, TMPDIR
  // or /tmp: ort.model_path is its /proc/self/fd path) or, where no such file can be written,
  // held whole in ort.model_data.
  runtime::OrtOptions ort;
  std::shared_ptr<const runtime::UnlinkedFile> fused_file;
  // The skeleton's weights (runtime::SharedWeights::TakeFromFile, or optimize::FusedModel::weights
  // once fused): only sessions given these (ort.shared_weights has adopted them) can open
  // ort.model_data. Held for the version's lifetime so that instances and shadow lanes opened
  // later find them.
  std::shared_ptr<runtime::SharedModelWeights> weights;
};

struct LoaderOptions {
  // Graph fusion as the model's graph_fusion parameter asks; false skips it (tests, tools).
  bool allow_graph_fusion = true;
};

// The fusion a version gets at load with graph_fusion auto: tide's attention and elementwise kernels
// where the parameters ask for them and this CPU runs them vectorized; BF16 attention products
// where attention_precision is bf16, or auto and `graph_precision` (onnx_graph::GraphPrecision of
// the model) is "int8", and the CPU has AVX512_BF16; a decoder's causal attention only where it is
// bf16 (auto keeps it FP32). `tide eval --served-variant` fuses the same way.
optimize::FusionOptions LoadFusionOptions(const config::TideParameters& parameters, std::string_view graph_precision);

absl::StatusOr<std::shared_ptr<const LoadedModel>> LoadModel(const config::RepositoryModel& model,
                                                             const config::ModelVersion& version,
                                                             const LoaderOptions& options = {});

// Opens the backend of instance `instance` (0-based) of `model`. Called once per instance while
// the model's scheduler is built, from the building thread, and with kShadowLaneInstance for the
// extra backend a shadow lane (serving/shadow_lane.h) opens on its own thread: the ONNX Runtime one
// then runs on that thread alone (intra_op_threads 1) and allocates from its own arena, not the
// process-wide shared one, so that no allocator lock is shared between an idle-priority session
// and the live ones.
inline constexpr int kShadowLaneInstance = -1;
using BackendFactory = std::function<absl::StatusOr<std::unique_ptr<runtime::ModelBackend>>(
    const LoadedModel& model, int instance)>;

BackendFactory OrtBackendFactory();

}  // namespace tide::serving
