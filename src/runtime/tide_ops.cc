#include "runtime/tide_ops.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "onnxruntime_cxx_api.h"
#include "onnxruntime_lite_custom_op.h"
#include "runtime/padded_attention.h"

namespace tide::runtime {
namespace {

std::string Dims(const std::vector<int64_t>& shape) { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

struct PaddedAttentionKernel {
  PaddedAttentionKernel(const OrtApi*, const OrtKernelInfo* info) {
    Ort::ConstKernelInfo ki(info);
    heads_ = ki.GetAttribute<int64_t>("num_heads");
    scale_ = ki.GetAttribute<float>("scale");
  }

  Ort::Status Compute(OrtKernelContext* context, const Ort::Custom::Tensor<float>& q, const Ort::Custom::Tensor<float>& k,
                      const Ort::Custom::Tensor<float>& v, const Ort::Custom::Tensor<float>& bias,
                      const Ort::Custom::Tensor<int32_t>& mask, Ort::Custom::Tensor<float>& out) {
    const std::vector<int64_t>& shape = q.Shape();
    auto fail = [](const std::string& what) {
      return Ort::Status(absl::StrCat("ai.tide.PaddedAttention: ", what).c_str(), ORT_INVALID_ARGUMENT);
    };
    if (shape.size() != 3 || heads_ <= 0 || shape[2] % heads_ != 0) {
      return fail(absl::StrCat("query ", Dims(shape), " is not [batch, seq, num_heads (", heads_, ") x head_size]"));
    }
    if (k.Shape() != shape || v.Shape() != shape) {
      return fail(absl::StrCat("key ", Dims(k.Shape()), " and value ", Dims(v.Shape()), " must have the query's shape ",
                               Dims(shape), " (self-attention)"));
    }
    if (bias.Shape() != std::vector<int64_t>{3 * shape[2]}) {
      return fail(absl::StrCat("bias ", Dims(bias.Shape()), " is not [", 3 * shape[2], "]"));
    }
    if (mask.Shape() != std::vector<int64_t>{shape[0], shape[1]}) {
      return fail(absl::StrCat("key_padding_mask ", Dims(mask.Shape()), " is not [", shape[0], ", ", shape[1], "]"));
    }
    AttentionShape s;
    s.batch = shape[0];
    s.seq = shape[1];
    s.heads = heads_;
    s.head_size = shape[2] / heads_;
    s.scale = scale_;
    float* o = out.Allocate(shape);
    if (s.batch * s.seq == 0) return Ort::Status{nullptr};
    ParallelFor parallel_for = [context](size_t units, const std::function<void(size_t)>& fn) {
      Ort::ThrowOnError(Ort::GetApi().KernelContext_ParallelFor(
          context, [](void* data, size_t i) { (*static_cast<const std::function<void(size_t)>*>(data))(i); }, units, 0,
          const_cast<std::function<void(size_t)>*>(&fn)));
    };
    PaddedAttention(s, q.Data(), k.Data(), v.Data(), bias.Data(), mask.Data(), o, parallel_for);
    return Ort::Status{nullptr};
  }

  int64_t heads_ = 0;
  float scale_ = 1.0f;
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
    Ort::ThrowOnError(Ort::GetApi().CustomOpDomain_Add(d, attention));
    return d;
  }();
  Ort::ThrowOnError(Ort::GetApi().AddCustomOpDomain(options, domain));
}

}  // namespace tide::runtime
