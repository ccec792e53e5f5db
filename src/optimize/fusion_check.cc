#include "optimize/fusion_check.h"

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "onnx_graph/model_io.h"
#include "optimize/tide_attention.h"
#include "optimize/tide_elementwise.h"
#include "runtime/tide_ops.h"

namespace tide::optimize {

// The rewrites (tide_attention.h, tide_elementwise.h) name the operators the runtime registers (tide_ops.h).
static_assert(std::string_view(kTideDomain) == runtime::kTideOpDomain);
static_assert(std::string_view(kTidePaddedAttention) == runtime::kPaddedAttentionOp);
static_assert(std::string_view(kTideCausalAttention) == runtime::kCausalAttentionOp);
static_assert(std::string_view(kTidePrecisionBf16) == runtime::kPaddedAttentionBf16);
static_assert(std::string_view(kTideBiasGelu) == runtime::kBiasGeluOp);
static_assert(std::string_view(kTideLayerNorm) == runtime::kLayerNormOp);
static_assert(std::string_view(kTideSkipLayerNorm) == runtime::kSkipLayerNormOp);

// Activations re-quantized per batch (tide quantize --int8): float-rounding-level differences
// before such a node can flip uint8 codes, so fused and unfused INT8 models legitimately differ
// by more than FP32 ones (see fusion_check_test.cc for a measurement).
bool IsDynamicallyQuantized(const onnx::ModelProto& m) {
  for (const auto& n : m.graph().node()) {
    if (n.op_type() == "DynamicQuantizeMatMul" || n.op_type() == "DynamicQuantizeLinear" ||
        n.op_type() == "MatMulInteger" || n.op_type() == "MatMulIntegerToFloat") {
      return true;
    }
  }
  return false;
}

runtime::TokenBatch ProbeBatch(const ModelSignature& signature, int64_t vocab_size,
                               int64_t max_sequence_length) {
  const int64_t seq = std::clamp<int64_t>(max_sequence_length, 4, 24);
  const int64_t lengths[3] = {seq, std::max<int64_t>(2, seq * 2 / 3), 3};
  runtime::TokenBatch b;
  b.Resize(3, seq, !signature.token_type_ids_name.empty());
  const int64_t range = std::max<int64_t>(2, std::min<int64_t>(vocab_size, 30000));
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t t = 0; t < seq; ++t) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const bool valid = t < lengths[r];
      b.input_ids[r * seq + t] = valid ? 1 + static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(range - 1)) : 0;
      b.attention_mask[r * seq + t] = valid ? 1 : 0;
    }
  }
  return b;
}

absl::StatusOr<runtime::Logits> RunOnce(const runtime::OrtOptions& options, const runtime::TokenBatch& batch) {
  auto backend = runtime::OrtBackend::Create(options);
  if (!backend.ok()) return backend.status();
  runtime::Logits out;
  if (absl::Status s = (*backend)->Run(batch, &out); !s.ok()) return s;
  return out;
}

namespace {

ProbeComparison Compare(const runtime::Logits& a, const runtime::Logits& b, bool quantized) {
  double scale = 1.0;
  ProbeComparison c;
  for (size_t i = 0; i < a.values.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(a.values[i])));
    const double d = std::fabs(static_cast<double>(b.values[i]) - a.values[i]);
    c.max_abs_diff = std::isnan(d) ? INFINITY : std::max(c.max_abs_diff, d);
  }
  c.tolerance = (quantized ? 2e-2 : 1e-3) * scale;
  return c;
}

// The model at `path`, parsed and fused; `reason` says why there is nothing to serve instead.
struct Fused {
  absl::StatusOr<onnx::ModelProto> model = absl::UnknownError("not parsed");
  FusionReport report;
  std::string reason;
};

// `options`' model parsed and fused: its file, or a skeleton in model_data whose weights are
// `base` (their placeholders stay placeholders: the passes read only small constants' values).
Fused ParseAndFuse(const runtime::OrtOptions& options, const runtime::SharedModelWeights* base,
                   const FusionOptions& fusion) {
  Fused f;
  // A file is parsed as a stream: never the file's bytes and the parsed model side by side.
  f.model = options.model_path.empty() ? onnx_graph::ParseModel(options.model_data)
                                       : onnx_graph::ReadModelFile(options.model_path);
  if (!f.model.ok()) {
    f.reason = std::string(f.model.status().message());
    return f;
  }
  std::unordered_set<std::string> shared;
  if (base != nullptr) shared.insert(base->names.begin(), base->names.end());
  for (const auto& t : f.model->graph().initializer()) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL && !shared.count(t.name())) {
      f.reason = "the model keeps its weights in external data";
      return f;
    }
  }
  absl::StatusOr<FusionReport> report = FuseTransformer(fusion, &*f.model);
  if (!report.ok()) {
    f.reason = std::string(report.status().message());
    return f;
  }
  f.report = *report;
  if (report->fused() == 0) f.reason = "no attention or skip-layernorm subgraph matched";
  return f;
}

}  // namespace

absl::StatusOr<ProbeComparison> CompareOnProbe(const runtime::OrtOptions& original, const runtime::OrtOptions& fused,
                                               const runtime::TokenBatch& probe, bool quantized) {
  absl::StatusOr<runtime::Logits> a = RunOnce(original, probe);
  if (!a.ok()) return absl::Status(a.status().code(), absl::StrCat("original model on the probe batch: ", a.status().message()));
  absl::StatusOr<runtime::Logits> b = RunOnce(fused, probe);
  if (!b.ok()) return absl::Status(b.status().code(), absl::StrCat("fused model on the probe batch: ", b.status().message()));
  if (a->values.size() != b->values.size()) return absl::InternalError("fused model returned a different number of logits");
  return Compare(*a, *b, quantized);
}

FusedModel PrepareFusedModel(const runtime::OrtOptions& options, const runtime::TokenBatch& probe,
                             const std::string& spill_dir, const FusionOptions& fusion) {
  FusedModel result;
  // The original as a skeleton (runtime::SharedWeights::TakeFromFile): its weights are `base`,
  // which every session of it or of the fused graph reads, none of them copies.
  std::shared_ptr<runtime::SharedModelWeights> base;
  if (options.model_path.empty()) {
    if (options.shared_weights != nullptr && !options.model_data.empty()) {
      absl::StatusOr<std::shared_ptr<runtime::SharedModelWeights>> adopted =
          options.shared_weights->ForModel("", options.model_data);
      if (adopted.ok()) base = *std::move(adopted);
    }
    if (base == nullptr) {
      result.reason = "the model is not a file";
      return result;
    }
  }
  // 1. Does anything fuse? The parse is dropped again: the original's probe session must not open
  //    beside it (at the load's peak, one session of the original model is all the memory held).
  bool quantized = false;
  {
    Fused first = ParseAndFuse(options, base.get(), fusion);
    if (!first.reason.empty()) {
      result.reason = first.reason;
      result.report = first.report;
      return result;
    }
    quantized = IsDynamicallyQuantized(*first.model);
  }
  malloc_trim(0);
  // 2. The original's logits on the probe batch, from a temporary session: no shared weights kept
  //    for it, no pre-packed copy of its weights, and none of ONNX Runtime's graph rewrites (they
  //    copy weights; the reference is the graph as written, which makes the check stricter too).
  runtime::OrtOptions original = options;
  if (base == nullptr) original.shared_weights = nullptr;  // a skeleton's session needs its entry
  original.prepack_weights = false;
  original.graph_optimization_level = runtime::GraphOptimization::kDisable;
  // One session: not the version's second, wider session for requests alone (a second copy of
  // the original's weights at the load's peak).
  original.alone_intra_op_threads = 0;
  original.alone_session = nullptr;
  absl::StatusOr<runtime::Logits> expected = RunOnce(original, probe);
  if (base != nullptr) base->ReleaseResident();  // what the unpacked run read
  if (!expected.ok()) {
    result.reason = absl::StrCat("original model on the probe batch: ", expected.status().message());
    result.check_failed = true;
    return result;
  }
  malloc_trim(0);
  // 3. Parsed and fused again (the same deterministic rewrite), its weights taken into the shared
  //    entry the instances will use, the rest written out.
  Fused second = ParseAndFuse(options, base.get(), fusion);
  if (!second.reason.empty()) {
    result.reason = second.reason;
    return result;
  }
  result.report = second.report;
  onnx::ModelProto& model = *second.model;
  runtime::OrtOptions fused_options = original;
  fused_options.model_path.clear();
  fused_options.prepack_weights = options.prepack_weights;
  fused_options.graph_optimization_level = options.graph_optimization_level;
  if (options.shared_weights != nullptr && runtime::SharedWeights::Available()) {
    absl::StatusOr<std::shared_ptr<runtime::SharedModelWeights>> taken = options.shared_weights->TakeFromModel(&model, base.get());
    if (!taken.ok()) {
      result.reason = std::string(taken.status().message());
      return result;
    }
    result.weights = *std::move(taken);
    fused_options.shared_weights = options.shared_weights;
  }
  // A skeleton is a few kilobytes: kept in memory (ONNX Runtime refuses external data beside a
  // model opened by a /proc/self/fd path, even for initializers it is given). The whole fused
  // model goes to the spill file.
  if (!spill_dir.empty() && result.weights == nullptr) {
    auto file = runtime::UnlinkedFile::Create(spill_dir, [&model](int fd) -> absl::Status {
      if (!model.SerializeToFileDescriptor(fd)) return absl::UnavailableError("cannot serialize the fused model");
      return absl::OkStatus();
    });
    if (file.ok()) {
      result.file = *std::move(file);
      fused_options.model_path = result.file->path();
    } else {
      result.spill_error = std::string(file.status().message());
    }
  }
  if (result.file == nullptr && !model.SerializeToString(&fused_options.model_data)) {
    result.reason = "cannot serialize the fused model";
    result.weights.reset();
    return result;
  }
  {
    onnx::ModelProto gone;  // the parsed model is no longer needed: freed before the session opens
    gone.Swap(&model);
  }
  malloc_trim(0);
  if (result.weights != nullptr) {
    options.shared_weights->Adopt(fused_options.model_path, fused_options.model_data, result.weights);
  }
  auto reject = [&result](std::string reason) {
    result.reason = std::move(reason);
    result.check_failed = true;
    result.file.reset();
    result.weights.reset();
  };
  absl::StatusOr<runtime::Logits> got = RunOnce(fused_options, probe);
  if (!got.ok()) {
    reject(absl::StrCat("fused model on the probe batch: ", got.status().message()));
    return result;
  }
  if (got->values.size() != expected->values.size()) {
    reject("fused model returned a different number of logits");
    return result;
  }
  const ProbeComparison cmp = Compare(*expected, *got, quantized);
  result.max_abs_diff = cmp.max_abs_diff;
  result.tolerance = cmp.tolerance;
  if (!cmp.ok()) {
    reject(absl::StrFormat("fused logits differ by %.3g (tolerance %.3g)", cmp.max_abs_diff, cmp.tolerance));
    return result;
  }
  result.fused = true;
  result.model_data = std::move(fused_options.model_data);
  return result;
}

}  // namespace tide::optimize
