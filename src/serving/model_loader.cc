#include "serving/model_loader.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_echo.h"
#include "onnx/onnx_pb.h"
#include "onnx_graph/graph_util.h"
#include "onnx_graph/model_io.h"
#include "optimize/fusion_check.h"
#include "runtime/bias_gelu.h"
#include "runtime/layer_norm.h"
#include "runtime/padded_attention.h"
#include "serving/kinded_tokenizer.h"
#include "serving/ort_options.h"
#include "spdlog/spdlog.h"
#include "serving/shared_prompt_prefix.h"
#include "tokenizer/prompt_encoder.h"

namespace tide::serving {

optimize::FusionOptions LoadFusionOptions(const config::TideParameters& parameters, std::string_view graph_precision) {
  optimize::FusionOptions fusion;
  fusion.tide_attention =
      parameters.attention_kernel == config::KernelChoice::kTide && runtime::PaddedAttentionCpuSupported();
  const bool bf16 = fusion.tide_attention && runtime::PaddedAttentionBf16Supported();
  fusion.tide_attention_bf16 =
      bf16 && (parameters.attention_precision == config::AttentionPrecision::kBf16 ||
               (parameters.attention_precision == config::AttentionPrecision::kAuto && graph_precision == "int8"));
  // A decoder's causal attention stays FP32 under auto: on qwen3-reranker-0.6b INT8 (28 layers) BF16
  // products moved the probe's logits by 0.050 against a 0.035 tolerance (bench/results/
  // causal-attention-qwen3-20261204.txt); `bf16` asks for it, and the probe still decides.
  fusion.tide_causal_attention_bf16 = bf16 && parameters.attention_precision == config::AttentionPrecision::kBf16;
  fusion.tide_elementwise = parameters.elementwise_kernel == config::KernelChoice::kTide &&
                            runtime::BiasGeluIsVectorized() && runtime::LayerNormIsVectorized();
  fusion.prune_last_layer = parameters.prune_last_layer;
  fusion.prompt_prefix = parameters.shared_prompt_prefix && parameters.prompt_template.has_value();
  return fusion;
}

absl::StatusOr<std::shared_ptr<const LoadedModel>> LoadModel(const config::RepositoryModel& model,
                                                             const config::ModelVersion& version,
                                                             const LoaderOptions& options) {
  auto m = std::make_shared<LoadedModel>();
  m->name = model.name;
  m->labels = model.labels;
  m->version = version.version;
  // The version folder's own config.pbtxt and tokenizer, when it has them (config/model_repository.h:
  // versions of one model may differ in family, tokenizer and prompt template).
  auto version_config = config::VersionConfig(model, version, &m->config_file);
  if (!version_config.ok()) return version_config.status();
  m->config = *std::move(version_config);
  const std::string& config_file = m->config_file;
  auto params = config::TideParameters::FromConfig(m->config, config_file);
  if (!params.ok()) return params.status();
  m->parameters = *params;

  const std::string tokenizer_path = config::VersionTokenizerPath(model, version, m->parameters.tokenizer).string();
  auto tok = tokenizer::Tokenizer::FromFile(tokenizer_path);
  if (!tok.ok()) {
    return absl::Status(tok.status().code(), absl::StrCat(model.name, ": tokenizer: ", tok.status().message()));
  }
  // Its request-time statuses get their error kinds here, where they enter serving.
  m->tokenizer = std::make_unique<KindedTokenizer>(*std::move(tok));
  {
    std::ifstream in(tokenizer_path, std::ios::binary);
    m->tokenizer_digest = std::hash<std::string>{}(std::string(std::istreambuf_iterator<char>(in), {}));
  }
  m->max_sequence_length =
      static_cast<size_t>(m->parameters.EffectiveMaxSequenceLength(m->tokenizer->default_max_length()));
  if (m->parameters.prompt_template.has_value()) {
    // A template for another tokenizer, or one whose frame fills max_sequence_length, is refused
    // here rather than on every request.
    absl::Status s = tokenizer::CheckPromptTemplate(*m->tokenizer, *m->parameters.prompt_template,
                                                    m->parameters.default_instruction.value_or(""),
                                                    m->max_sequence_length);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(config_file, ": parameters[\"prompt_template\"]: ", s.message()));
  }

  int instances = 0;
  for (const ModelInstanceGroup& g : m->config.instance_group()) instances += std::max(g.count(), 1);
  m->ort = MakeOrtOptions(m->parameters, version.model_file, std::max(instances, 1));
  runtime::OrtOptions& ort = m->ort;
  // The signature from the graph alone (the weights are not read).
  auto signature = runtime::OrtBackend::ReadSignature(ort.model_path);
  if (!signature.ok()) return signature.status();
  m->signature = *signature;
  if (m->signature.num_labels < 1) {
    return absl::FailedPreconditionError(absl::StrCat(ort.model_path, ": output ", m->signature.logits_name,
                                                      " has a dynamic label dimension; tide needs a fixed one"));
  }
  if (ort.shared_weights != nullptr && runtime::SharedWeights::Available()) {
    // The weights go from the file straight into the version's shared entry (its weights file),
    // one tensor at a time; every session from here on (fusion probe, instances, shadow lanes)
    // opens the skeleton with that entry, so no step of the load holds the whole model.
    auto taken = ort.shared_weights->TakeFromFile(ort.model_path);
    if (!taken.ok()) return taken.status();
    m->weights = std::move(taken->weights);
    ort.model_label = ort.model_path;
    ort.model_path.clear();
    ort.model_data = std::move(taken->skeleton);
    ort.shared_weights->Adopt("", ort.model_data, m->weights);
  }
  {
    // From the original graph (the skeleton, or the file parsed once with external data left on
    // disk): graph fusion below may replace the embedding Gathers; the precision is what the file
    // computes in.
    absl::StatusOr<onnx::ModelProto> graph =
        ort.model_path.empty() ? onnx_graph::ParseModel(ort.model_data) : onnx_graph::ReadModelFile(ort.model_path);
    absl::StatusOr<GraphEmbeddingRows> rows =
        graph.ok() ? absl::StatusOr<GraphEmbeddingRows>(ReadEmbeddingRows(*graph, m->signature))
                   : absl::StatusOr<GraphEmbeddingRows>(graph.status());
    if (graph.ok()) {
      m->precision = std::string(onnx_graph::GraphPrecision(*graph));
      m->weight_flops_per_token = onnx_graph::WeightFlopsPerToken(graph->graph());
    }
    auto limits = ResolveTokenInputLimits(m->signature, *m->tokenizer, rows, m->parameters.token_type_vocab_size);
    if (!limits.ok()) return absl::Status(limits.status().code(), absl::StrCat(config_file, ": ", limits.status().message()));
    m->token_input_limits = limits->limits;
    if (limits->log_is_warning) {
      spdlog::warn("model {} version {}: {}", EscapeForLog(m->name), m->version, limits->log);
    } else {
      spdlog::info("model {} version {}: {}", EscapeForLog(m->name), m->version, limits->log);
    }
  }
  if (options.allow_graph_fusion && m->parameters.graph_fusion == config::GraphFusion::kAuto) {
    // Fused attention / skip-layernorm, checked on a padded probe batch against the original.
    // With shared weights (the default) the fused model's weights move into the version's shared
    // entry and its graph stays as a skeleton of a few KB, which every instance (or shadow lane)
    // opens with that entry; without, the fused model goes straight into an unnamed file in the
    // temp directory (never held in memory for the model's lifetime: it is as large as the
    // weights), which ONNX Runtime reads by path whenever an instance opens.
    const auto fuse_start = std::chrono::steady_clock::now();
    const optimize::FusionOptions fusion = LoadFusionOptions(m->parameters, m->precision);
    std::error_code ec;
    const std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
    optimize::FusedModel fused = optimize::PrepareFusedModel(
        ort, optimize::ProbeBatch(m->signature, static_cast<int64_t>(m->tokenizer->vocab_size()),
                                  static_cast<int64_t>(m->max_sequence_length)),
        ec ? std::string("/tmp") : tmp.string(), fusion);
    const double fuse_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - fuse_start).count();
    if (fused.fused) {
      spdlog::info("model {} version {}: graph fusion: {}; probe max |fused - original| {:.3g} (limit {:.3g}); {:.0f} ms",
                   EscapeForLog(m->name), m->version, fused.report.Summary(), fused.max_abs_diff, fused.tolerance,
                   fuse_ms);
      if (fused.weights != nullptr) {
        // The weights live in the version's shared entry; the graph is a skeleton of a few KB.
        spdlog::info("model {} version {}: fused graph {} KB, its weights ({} MB) shared by every session",
                     EscapeForLog(m->name), m->version, fused.model_data.size() >> 10, fused.weights->bytes >> 20);
        m->weights = std::move(fused.weights);  // the original's entry goes, but for the bytes it shares
        ort.model_path.clear();
        ort.model_data = std::move(fused.model_data);
      } else if (fused.file != nullptr) {
        ort.model_path = fused.file->path();
        m->fused_file = std::move(fused.file);
      } else {
        spdlog::warn("model {} version {}: the fused graph stays in memory ({} MB): {}", EscapeForLog(m->name), m->version,
                     fused.model_data.size() >> 20, fused.spill_error);
        ort.model_path.clear();
        ort.model_data = std::move(fused.model_data);
      }
      if (fused.report.prompt_prefix_layers > 0) {
        // The keys and values of the prompt's shared first tokens, once (shared_prompt_prefix.h).
        const auto prefix_start = std::chrono::steady_clock::now();
        SharedPromptPrefix shared = PrepareSharedPromptPrefix(
            ort, *m->tokenizer, *m->parameters.prompt_template, m->parameters.default_instruction.value_or(""),
            m->max_sequence_length);
        const double prefix_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - prefix_start).count();
        if (shared.prefix != nullptr) {
          spdlog::info("model {} version {}: shared prompt prefix: {} tokens computed once ({} before the "
                       "instruction, for requests with their own), each batch whose prompts start with them runs the "
                       "rest; probe ({} tokens) max |prefixed - whole| {:.3g} (limit {:.3g}); {:.0f} ms",
                       EscapeForLog(m->name), m->version, shared.prefix->length(), shared.shorter_tokens,
                       shared.probe_tokens, shared.max_abs_diff, shared.tolerance, prefix_ms);
          ort.prompt_prefix = std::move(shared.prefix);
        } else if (shared.check_failed) {
          spdlog::error("model {} version {}: shared prompt prefix rejected, every prompt runs whole: {}",
                        EscapeForLog(m->name), m->version, EscapeForLog(shared.reason));
        } else {
          spdlog::info("model {} version {}: no shared prompt prefix: {}", EscapeForLog(m->name), m->version,
                       EscapeForLog(shared.reason));
        }
      }
    } else if (fused.check_failed) {
      spdlog::error("model {} version {}: graph fusion rejected, serving the unfused model: {}", EscapeForLog(m->name),
                    m->version, EscapeForLog(fused.reason));
    } else {
      spdlog::info("model {} version {}: graph fusion skipped: {}", EscapeForLog(m->name), m->version,
                   EscapeForLog(fused.reason));
    }
  }
  if (!m->parameters.breaker_default_result.empty() &&
      static_cast<int64_t>(m->parameters.breaker_default_result.size()) != m->signature.num_labels) {
    return absl::InvalidArgumentError(absl::StrCat(
        config_file, ": parameters[\"breaker_default_result\"]: has ", m->parameters.breaker_default_result.size(),
        " value(s) but model output ", m->signature.logits_name, " has ", m->signature.num_labels, " label(s)"));
  }
  if (m->parameters.task == config::Task::kEmbed) {
    for (int64_t d : m->parameters.matryoshka_dimensions) {
      if (d > m->signature.num_labels) {
        return absl::InvalidArgumentError(absl::StrCat(
            config_file, ": parameters[\"matryoshka_dimensions\"]: ", d, " is larger than the model's dimension ",
            m->signature.num_labels, " (output ", m->signature.logits_name, ")"));
      }
    }
  }
  return std::shared_ptr<const LoadedModel>(std::move(m));
}

BackendFactory OrtBackendFactory() {
  return [](const LoadedModel& model, int instance) -> absl::StatusOr<std::unique_ptr<runtime::ModelBackend>> {
    runtime::OrtOptions ort = model.ort;
    if (instance == kShadowLaneInstance) {
      // One thread (the lane's own: no intra-op pool to create or schedule) and its own arena, so
      // that once warmed up it neither maps memory nor shares an allocator lock with live sessions.
      ort.intra_op_threads = 1;
      ort.share_env_arena = false;
    }
    auto backend = runtime::OrtBackend::Create(ort);
    if (!backend.ok()) return backend.status();
    if (instance == 0) {
      if (const runtime::SharedModelWeights* w = (*backend)->shared_weights(); w != nullptr) {
        if (!w->file_error.empty()) {
          spdlog::warn("model {} version {}: shared weights ({} MB) stay in memory: {}", EscapeForLog(model.name),
                       model.version, w->bytes >> 20, EscapeForLog(w->file_error));
        } else if (w->file != nullptr) {
          spdlog::info("model {} version {}: shared weights ({} MB) in an unnamed file in {}: pages leave memory "
                       "once read (parameter weights_file)",
                       EscapeForLog(model.name), model.version, w->bytes >> 20, EscapeForLog(w->file->dir()));
        }
      }
    }
    return std::unique_ptr<runtime::ModelBackend>(*std::move(backend));
  };
}

}  // namespace tide::serving
