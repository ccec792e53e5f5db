#include "runtime/tide_ops.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "onnxruntime_cxx_api.h"
#include "onnxruntime_lite_custom_op.h"
#include "runtime/bias_gelu.h"
#include "runtime/layer_norm.h"
#include "runtime/padded_attention.h"

namespace tide::runtime {
namespace {

std::string Dims(const std::vector<int64_t>& shape) { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

// The kernel context's intra-op pool as a runtime::ParallelFor.
ParallelFor OrtParallelFor(OrtKernelContext* context) {
  return [context](size_t units, const std::function<void(size_t)>& fn) {
    Ort::ThrowOnError(Ort::GetApi().KernelContext_ParallelFor(
        context, [](void* data, size_t i) { (*static_cast<const std::function<void(size_t)>*>(data))(i); }, units, 0,
        const_cast<std::function<void(size_t)>*>(&fn)));
  };
}

Ort::Status Fail(const char* op, const std::string& what) {
  return Ort::Status(absl::StrCat("ai.tide.", op, ": ", what).c_str(), ORT_INVALID_ARGUMENT);
}

// [rows, cols] of a tensor of rank >= 1 (cols = its last axis).
bool RowsCols(const std::vector<int64_t>& shape, int64_t* rows, int64_t* cols) {
  if (shape.empty()) return false;
  *cols = shape.back();
  *rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) *rows *= shape[i];
  return true;
}

bool IsVector(const Ort::Custom::Tensor<float>& t, int64_t n) { return t.Shape() == std::vector<int64_t>{n}; }

// Shape inference for every tide operator: the output has the first input's shape (float). Without
// it ONNX Runtime plans the graph after a tide operator with unknown shapes.
OrtStatusPtr OutputShapeOfInput0(Ort::ShapeInferContext& ctx) {
  try {
    // Rank 0 here means "not known" (every tide operator's input has rank >= 1): leave it so.
    if (ctx.GetInputCount() == 0 || ctx.GetInputShape(0).empty()) return nullptr;
    return ctx.SetOutputShape(0, ctx.GetInputShape(0)).release();
  } catch (const Ort::Exception&) {
    return nullptr;  // the input's shape is unknown: nothing to infer
  }
}

// The attention operators' optional attribute precision: "fp32" (also when absent) or "bf16"; any
// other value is kept to fail every Compute with (an attribute error at session creation would
// name no operator).
struct PrecisionAttribute {
  explicit PrecisionAttribute(const Ort::ConstKernelInfo& ki) {
    std::string value = "fp32";
    try {
      value = ki.GetAttribute<std::string>("precision");
    } catch (const Ort::Exception&) {
    }
    if (value == kPaddedAttentionBf16) {
      precision = AttentionPrecision::kBf16;
    } else if (value != "fp32") {
      bad = value;
    }
  }
  std::string Error() const { return bad.empty() ? "" : absl::StrCat("precision \"", bad, "\" is not fp32 or bf16"); }

  AttentionPrecision precision = AttentionPrecision::kFp32;
  std::string bad;
};

struct PaddedAttentionKernel {
  static OrtStatusPtr InferOutputShape(Ort::ShapeInferContext& ctx) { return OutputShapeOfInput0(ctx); }

  PaddedAttentionKernel(const OrtApi*, const OrtKernelInfo* info) : precision_(Ort::ConstKernelInfo(info)) {
    Ort::ConstKernelInfo ki(info);
    heads_ = ki.GetAttribute<int64_t>("num_heads");
    scale_ = ki.GetAttribute<float>("scale");
  }

  Ort::Status Compute(OrtKernelContext* context, const Ort::Custom::Tensor<float>& q, const Ort::Custom::Tensor<float>& k,
                      const Ort::Custom::Tensor<float>& v, const Ort::Custom::Tensor<float>& bias,
                      const Ort::Custom::Tensor<int32_t>& mask, Ort::Custom::Tensor<float>& out) {
    const std::vector<int64_t>& shape = q.Shape();
    auto fail = [](const std::string& what) { return Fail(kPaddedAttentionOp, what); };
    if (!precision_.bad.empty()) return fail(precision_.Error());
    if (shape.size() != 3 || heads_ <= 0 || shape[2] % heads_ != 0) {
      return fail(absl::StrCat("query ", Dims(shape), " is not [batch, seq, num_heads (", heads_, ") x head_size]"));
    }
    // Self-attention, or its first positions' queries alone (q [batch, queries <= seq, hidden]).
    const std::vector<int64_t>& kv = k.Shape();
    if (kv.size() != 3 || kv[0] != shape[0] || kv[2] != shape[2] || shape[1] > kv[1] || v.Shape() != kv ||
        (shape[1] == 0 && kv[1] > 0)) {
      return fail(absl::StrCat("key ", Dims(kv), " and value ", Dims(v.Shape()), " must have the query's shape ",
                               Dims(shape), ", or its batch and width with at least its positions"));
    }
    if (bias.Shape() != std::vector<int64_t>{3 * shape[2]}) {
      return fail(absl::StrCat("bias ", Dims(bias.Shape()), " is not [", 3 * shape[2], "]"));
    }
    if (mask.Shape() != std::vector<int64_t>{kv[0], kv[1]}) {
      return fail(absl::StrCat("key_padding_mask ", Dims(mask.Shape()), " is not [", kv[0], ", ", kv[1], "]"));
    }
    AttentionShape s;
    s.batch = shape[0];
    s.seq = kv[1];
    s.queries = shape[1];
    s.heads = heads_;
    s.head_size = shape[2] / heads_;
    s.scale = scale_;
    s.precision = precision_.precision;
    float* o = out.Allocate(shape);
    if (s.batch * s.seq == 0) return Ort::Status{nullptr};
    PaddedAttention(s, q.Data(), k.Data(), v.Data(), bias.Data(), mask.Data(), o, OrtParallelFor(context));
    return Ort::Status{nullptr};
  }

  PrecisionAttribute precision_;
  int64_t heads_ = 0;
  float scale_ = 1.0f;
};

// ai.tide.CausalAttention(q, k, v, seqlens_k) -> output: GroupQueryAttention's prefill without past
// (tide_ops.h), on PaddedAttention with causal and kv_heads over a mask built from seqlens_k.
struct CausalAttentionKernel {
  static OrtStatusPtr InferOutputShape(Ort::ShapeInferContext& ctx) { return OutputShapeOfInput0(ctx); }

  CausalAttentionKernel(const OrtApi*, const OrtKernelInfo* info) : precision_(Ort::ConstKernelInfo(info)) {
    Ort::ConstKernelInfo ki(info);
    heads_ = ki.GetAttribute<int64_t>("num_heads");
    kv_heads_ = ki.GetAttribute<int64_t>("kv_num_heads");
    scale_ = ki.GetAttribute<float>("scale");
  }

  Ort::Status Compute(OrtKernelContext* context, const Ort::Custom::Tensor<float>& q, const Ort::Custom::Tensor<float>& k,
                      const Ort::Custom::Tensor<float>& v, const Ort::Custom::Tensor<int32_t>& seqlens_k,
                      Ort::Custom::Tensor<float>& out) {
    const std::vector<int64_t>& shape = q.Shape();
    if (!precision_.bad.empty()) return Fail(kCausalAttentionOp, precision_.Error());
    if (heads_ <= 0 || kv_heads_ <= 0 || heads_ % kv_heads_ != 0) {
      return Fail(kCausalAttentionOp,
                  absl::StrCat("num_heads ", heads_, " is not a positive multiple of kv_num_heads ", kv_heads_));
    }
    if (shape.size() != 3 || shape[2] % heads_ != 0) {
      return Fail(kCausalAttentionOp, absl::StrCat("query ", Dims(shape), " is not [batch, seq, num_heads (", heads_,
                                                   ") x head_size]"));
    }
    const int64_t batch = shape[0], queries = shape[1], head_size = shape[2] / heads_;
    // The keys may lead with a shared prompt prefix's (optimize/prompt_prefix.h): [B, S >= Sq, ...],
    // query row i at key position S - Sq + i.
    const int64_t seq = k.Shape().size() == 3 ? k.Shape()[1] : -1;
    const std::vector<int64_t> kv_shape{batch, seq, kv_heads_ * head_size};
    if (seq < queries || k.Shape() != kv_shape || v.Shape() != kv_shape) {
      return Fail(kCausalAttentionOp,
                  absl::StrCat("key ", Dims(k.Shape()), " and value ", Dims(v.Shape()), " are not [", batch,
                               ", seq >= ", queries, " (the query's), ", kv_heads_ * head_size,
                               " (kv_num_heads x the query's head size)]"));
    }
    if (seqlens_k.Shape() != std::vector<int64_t>{batch}) {
      return Fail(kCausalAttentionOp, absl::StrCat("seqlens_k ", Dims(seqlens_k.Shape()), " is not [", batch, "]"));
    }
    // Row b's keys are positions 0..seqlens_k[b] (right padding, as GroupQueryAttention reads them).
    thread_local std::vector<int32_t> mask;
    mask.assign(static_cast<size_t>(batch * seq), 0);
    const int32_t* last = seqlens_k.Data();
    for (int64_t b = 0; b < batch; ++b) {
      if (last[b] < 0 || last[b] >= seq) {
        return Fail(kCausalAttentionOp, absl::StrCat("seqlens_k[", b, "] = ", last[b], " is outside [0, ", seq, ")"));
      }
      std::fill_n(mask.begin() + b * seq, last[b] + 1, 1);
    }
    AttentionShape s;
    s.batch = batch;
    s.seq = seq;
    s.heads = heads_;
    s.kv_heads = kv_heads_;
    s.head_size = head_size;
    s.scale = scale_;
    s.precision = precision_.precision;
    s.causal = true;
    s.queries = queries;
    s.query_offset = seq - queries;
    float* o = out.Allocate(shape);
    if (batch * queries == 0) return Ort::Status{nullptr};
    PaddedAttention(s, q.Data(), k.Data(), v.Data(), nullptr, mask.data(), o, OrtParallelFor(context));
    return Ort::Status{nullptr};
  }

  PrecisionAttribute precision_;
  int64_t heads_ = 0, kv_heads_ = 0;
  float scale_ = 1.0f;
};

// ai.tide.BiasGelu(x [..., N], bias [N]) -> GELU(x + bias) (bias_gelu.h).
struct BiasGeluKernel {
  static OrtStatusPtr InferOutputShape(Ort::ShapeInferContext& ctx) { return OutputShapeOfInput0(ctx); }

  BiasGeluKernel(const OrtApi*, const OrtKernelInfo*) {}

  Ort::Status Compute(OrtKernelContext* context, const Ort::Custom::Tensor<float>& x,
                      const Ort::Custom::Tensor<float>& bias, Ort::Custom::Tensor<float>& y) {
    int64_t rows = 0, cols = 0;
    if (!RowsCols(x.Shape(), &rows, &cols)) return Fail(kBiasGeluOp, "input is a scalar");
    if (!IsVector(bias, cols)) {
      return Fail(kBiasGeluOp, absl::StrCat("bias ", Dims(bias.Shape()), " is not [", cols, "] (input ", Dims(x.Shape()), ")"));
    }
    float* out = y.Allocate(x.Shape());
    BiasGelu(rows, cols, x.Data(), bias.Data(), out, OrtParallelFor(context));
    return Ort::Status{nullptr};
  }
};

// ai.tide.LayerNorm(x [..., N], gamma [N], beta [N]) and ai.tide.SkipLayerNorm(x, skip (x's
// shape), gamma, beta, bias [N]), attribute epsilon (layer_norm.h).
struct LayerNormKernelBase {
  static OrtStatusPtr InferOutputShape(Ort::ShapeInferContext& ctx) { return OutputShapeOfInput0(ctx); }

  LayerNormKernelBase(const OrtApi*, const OrtKernelInfo* info) {
    epsilon_ = Ort::ConstKernelInfo(info).GetAttribute<float>("epsilon");
  }

  Ort::Status Run(OrtKernelContext* context, const char* op, const Ort::Custom::Tensor<float>& x,
                  const Ort::Custom::Tensor<float>* skip, const Ort::Custom::Tensor<float>& gamma,
                  const Ort::Custom::Tensor<float>& beta, const Ort::Custom::Tensor<float>* bias,
                  Ort::Custom::Tensor<float>& y) {
    int64_t rows = 0, cols = 0;
    if (!RowsCols(x.Shape(), &rows, &cols)) return Fail(op, "input is a scalar");
    if (!(epsilon_ > 0.0f)) return Fail(op, "epsilon is not positive");
    if (skip != nullptr && skip->Shape() != x.Shape()) {
      return Fail(op, absl::StrCat("skip ", Dims(skip->Shape()), " is not the input's shape ", Dims(x.Shape())));
    }
    for (const auto& [name, t] : {std::pair<const char*, const Ort::Custom::Tensor<float>*>{"gamma", &gamma},
                                  {"beta", &beta}, {"bias", bias}}) {
      if (t != nullptr && !IsVector(*t, cols)) {
        return Fail(op, absl::StrCat(name, " ", Dims(t->Shape()), " is not [", cols, "] (input ", Dims(x.Shape()), ")"));
      }
    }
    float* out = y.Allocate(x.Shape());
    LayerNormInputs in;
    in.x = x.Data();
    in.skip = skip != nullptr ? skip->Data() : nullptr;
    in.bias = bias != nullptr ? bias->Data() : nullptr;
    in.gamma = gamma.Data();
    in.beta = beta.Data();
    LayerNorm(rows, cols, epsilon_, in, out, OrtParallelFor(context));
    return Ort::Status{nullptr};
  }

  float epsilon_ = 1e-5f;
};

struct LayerNormKernel : LayerNormKernelBase {
  using LayerNormKernelBase::LayerNormKernelBase;
  Ort::Status Compute(OrtKernelContext* context, const Ort::Custom::Tensor<float>& x, const Ort::Custom::Tensor<float>& gamma,
                      const Ort::Custom::Tensor<float>& beta, Ort::Custom::Tensor<float>& y) {
    return Run(context, kLayerNormOp, x, nullptr, gamma, beta, nullptr, y);
  }
};

struct SkipLayerNormKernel : LayerNormKernelBase {
  using LayerNormKernelBase::LayerNormKernelBase;
  Ort::Status Compute(OrtKernelContext* context, const Ort::Custom::Tensor<float>& x, const Ort::Custom::Tensor<float>& skip,
                      const Ort::Custom::Tensor<float>& gamma, const Ort::Custom::Tensor<float>& beta,
                      const Ort::Custom::Tensor<float>& bias, Ort::Custom::Tensor<float>& y) {
    return Run(context, kSkipLayerNormOp, x, &skip, gamma, beta, &bias, y);
  }
};

}  // namespace

void RegisterTideOps(OrtSessionOptions* options) {
  // Created once, never destroyed: sessions (and ONNX Runtime's kernel registry) keep pointers to
  // the domain and its operators.
  static OrtCustomOpDomain* const domain = [] {
    OrtCustomOpDomain* d = nullptr;
    Ort::ThrowOnError(Ort::GetApi().CreateCustomOpDomain(kTideOpDomain, &d));
    static Ort::Custom::OrtLiteCustomOp* const attention =
        Ort::Custom::CreateLiteCustomOp<PaddedAttentionKernel>(kPaddedAttentionOp, "CPUExecutionProvider");
    static Ort::Custom::OrtLiteCustomOp* const causal_attention =
        Ort::Custom::CreateLiteCustomOp<CausalAttentionKernel>(kCausalAttentionOp, "CPUExecutionProvider");
    static Ort::Custom::OrtLiteCustomOp* const gelu =
        Ort::Custom::CreateLiteCustomOp<BiasGeluKernel>(kBiasGeluOp, "CPUExecutionProvider");
    static Ort::Custom::OrtLiteCustomOp* const layer_norm =
        Ort::Custom::CreateLiteCustomOp<LayerNormKernel>(kLayerNormOp, "CPUExecutionProvider");
    static Ort::Custom::OrtLiteCustomOp* const skip_layer_norm =
        Ort::Custom::CreateLiteCustomOp<SkipLayerNormKernel>(kSkipLayerNormOp, "CPUExecutionProvider");
    for (Ort::Custom::OrtLiteCustomOp* op : {attention, causal_attention, gelu, layer_norm, skip_layer_norm}) {
      Ort::ThrowOnError(Ort::GetApi().CustomOpDomain_Add(d, op));
    }
    return d;
  }();
  Ort::ThrowOnError(Ort::GetApi().AddCustomOpDomain(options, domain));
}

}  // namespace tide::runtime
