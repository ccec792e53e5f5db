#include "onnx_graph/graph_util.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tide::onnx_graph {

int64_t NumElements(const onnx::TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) n *= d;
  return n;
}

size_t ElementSize(int32_t data_type) {
  switch (data_type) {
    case onnx::TensorProto::FLOAT: case onnx::TensorProto::INT32: case onnx::TensorProto::UINT32: return 4;
    case onnx::TensorProto::INT8: case onnx::TensorProto::UINT8: case onnx::TensorProto::BOOL: return 1;
    case onnx::TensorProto::FLOAT16: case onnx::TensorProto::BFLOAT16: case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16: return 2;
    case onnx::TensorProto::INT64: case onnx::TensorProto::UINT64: case onnx::TensorProto::DOUBLE: return 8;
    default: return 0;
  }
}

uint64_t DenseTensorBytes(const onnx::TensorProto& t) {
  uint64_t bytes = ElementSize(t.data_type());
  for (int64_t d : t.dims()) bytes *= static_cast<uint64_t>(d < 0 ? 0 : d);
  return bytes;
}

absl::StatusOr<std::vector<float>> ReadFloatTensor(const onnx::TensorProto& t) {
  if (t.data_type() != onnx::TensorProto::FLOAT) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name(), " is not float32"));
  }
  for (int64_t d : t.dims()) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name(), " has a negative dimension"));
  }
  const int64_t n = NumElements(t);
  std::vector<float> v(static_cast<size_t>(n));
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name(), " has external data that was not loaded"));
  }
  if (t.has_raw_data()) {
    if (static_cast<int64_t>(t.raw_data().size()) != n * 4) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name(), ": raw_data has ", t.raw_data().size(),
                                                     " bytes, dims need ", n * 4));
    }
    std::memcpy(v.data(), t.raw_data().data(), static_cast<size_t>(n) * 4);  // x86/ARM: little-endian like ONNX
  } else {
    if (t.float_data_size() != n) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name(), ": float_data has ", t.float_data_size(),
                                                     " values, dims need ", n));
    }
    std::copy(t.float_data().begin(), t.float_data().end(), v.begin());
  }
  return v;
}

int64_t TensorBytes(const onnx::TensorProto& t) {
  if (t.has_raw_data()) return static_cast<int64_t>(t.raw_data().size());
  return static_cast<int64_t>(t.float_data_size()) * 4 + static_cast<int64_t>(t.int32_data_size()) * 4 +
         static_cast<int64_t>(t.int64_data_size()) * 8 + static_cast<int64_t>(t.double_data_size()) * 8;
}

int64_t InitializerBytes(const onnx::GraphProto& g) {
  int64_t total = 0;
  for (const auto& t : g.initializer()) total += TensorBytes(t);
  return total;
}

std::string NodeName(const onnx::NodeProto& n) { return n.name().empty() ? n.output(0) : n.name(); }

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));  // inf / NaN
  int32_t e = static_cast<int32_t>(exp) - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);                           // overflow
  if (e <= 0) {                                                                            // subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into the exponent: correct
  return static_cast<uint16_t>(sign | half);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      int e = -1;
      do { ++e; mant <<= 1; } while (!(mant & 0x400u));
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

namespace {

// The nodes of a quantized graph (integer arithmetic, or quantize/dequantize pairs).
bool IsQuantizedOp(const std::string& op_type) {
  static const std::unordered_set<std::string> kQuantOps = {
      "QuantizeLinear",  "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger",
      "QLinearMatMul",   "QLinearConv",      "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QAttention",
      "QGemm",           "QOrderedMatMul",   "MatMulNBits",           "DynamicQuantizeLSTM", "QEmbedLayerNormalization"};
  return kQuantOps.count(op_type) > 0;
}

// The first float16 initializer of more than one element (a converted model's weights), or null.
const onnx::TensorProto* FirstHalfWeight(const onnx::GraphProto& g) {
  for (const auto& t : g.initializer()) {
    if (t.data_type() == onnx::TensorProto::FLOAT16 && NumElements(t) > 1) return &t;
  }
  return nullptr;
}

}  // namespace

absl::Status CheckNotQuantized(const onnx::ModelProto& model) {
  for (const auto& n : model.graph().node()) {
    if (IsQuantizedOp(n.op_type())) {
      return absl::FailedPreconditionError(absl::StrCat("the model is already quantized: node '", n.name(), "' is ",
                                                        n.op_type(), "; quantize the FP32 model instead"));
    }
  }
  if (const onnx::TensorProto* t = FirstHalfWeight(model.graph()); t != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("the model already holds float16 weights (initializer '", t->name(),
                                                      "'); convert the FP32 model instead"));
  }
  return absl::OkStatus();
}

std::string_view GraphPrecision(const onnx::ModelProto& model) {
  for (const auto& n : model.graph().node()) {
    if (IsQuantizedOp(n.op_type())) return "int8";
  }
  return FirstHalfWeight(model.graph()) != nullptr ? "fp16" : "fp32";
}

uint64_t WeightFlopsPerToken(const onnx::GraphProto& g) {
  static const std::unordered_set<std::string> kWeightProducts = {
      "MatMul",        "Gemm",          "FusedMatMul",          "MatMulInteger", "DynamicQuantizeMatMul",
      "MatMulIntegerToFloat", "Attention", "QAttention"};
  std::unordered_map<std::string, uint64_t> weights;  // value name -> elements of a 2-D weight
  for (const auto& t : g.initializer()) {
    if (t.dims_size() == 2 && t.dims(0) > 0 && t.dims(1) > 0) {
      weights[t.name()] = static_cast<uint64_t>(t.dims(0)) * static_cast<uint64_t>(t.dims(1));
    }
  }
  uint64_t elements = 0;
  for (const auto& n : g.node()) {  // topological order: a Cast of a weight comes before its reader
    if ((n.op_type() == "Cast" || n.op_type() == "DequantizeLinear") && n.input_size() > 0 && n.output_size() > 0) {
      auto it = weights.find(n.input(0));
      if (it != weights.end()) weights[n.output(0)] = it->second;
      continue;
    }
    if (!kWeightProducts.count(n.op_type())) continue;
    for (const auto& in : n.input()) {
      auto it = weights.find(in);
      if (it != weights.end()) elements += it->second;
    }
  }
  return 2 * elements;
}

Namer::Namer(const onnx::GraphProto& g) {
  for (const auto& t : g.initializer()) used_.insert(t.name());
  for (const auto& v : g.input()) used_.insert(v.name());
  for (const auto& v : g.output()) used_.insert(v.name());
  for (const auto& v : g.value_info()) used_.insert(v.name());
  for (const auto& n : g.node()) {
    used_.insert(n.name());
    for (const auto& o : n.output()) used_.insert(o);
    for (const auto& i : n.input()) used_.insert(i);
  }
}

std::string Namer::Fresh(const std::string& base) {
  std::string name = base;
  for (int i = 1; used_.count(name); ++i) name = absl::StrCat(base, "_", i);
  used_.insert(name);
  return name;
}

absl::StatusOr<NodeFilter> NodeFilter::Create(const std::vector<std::string>& include,
                                              const std::vector<std::string>& exclude) {
  NodeFilter f;
  auto compile = [](const std::vector<std::string>& in, std::vector<std::regex>* out) -> absl::Status {
    for (const auto& p : in) {
      try {
        out->emplace_back(p, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        return absl::InvalidArgumentError(absl::StrCat("bad node name pattern '", p, "': ", e.what()));
      }
    }
    return absl::OkStatus();
  };
  if (absl::Status s = compile(include, &f.include_); !s.ok()) return s;
  if (absl::Status s = compile(exclude, &f.exclude_); !s.ok()) return s;
  return f;
}

bool NodeFilter::Selected(const std::vector<std::string>& names) const {
  auto any = [&](const std::vector<std::regex>& res) {
    for (const auto& re : res) {
      for (const auto& n : names) {
        if (!n.empty() && std::regex_search(n, re)) return true;
      }
    }
    return false;
  };
  if (!include_.empty() && !any(include_)) return false;
  return !any(exclude_);
}

void CollectReads(const onnx::GraphProto& g, std::unordered_set<std::string>* reads) {
  for (const auto& n : g.node()) {
    for (const auto& i : n.input()) reads->insert(i);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectReads(a.g(), reads);
      for (const auto& sg : a.graphs()) CollectReads(sg, reads);
    }
  }
  for (const auto& o : g.output()) reads->insert(o.name());
}

int64_t DropUnusedInitializers(onnx::GraphProto* g) {
  std::unordered_set<std::string> reads;
  CollectReads(*g, &reads);
  int64_t removed = 0;
  std::unordered_set<std::string> gone;
  auto* inits = g->mutable_initializer();
  for (int i = inits->size() - 1; i >= 0; --i) {
    if (reads.count(inits->Get(i).name())) continue;
    removed += TensorBytes(inits->Get(i));
    gone.insert(inits->Get(i).name());
    inits->DeleteSubrange(i, 1);
  }
  auto* inputs = g->mutable_input();
  for (int i = inputs->size() - 1; i >= 0; --i) {
    if (gone.count(inputs->Get(i).name())) inputs->DeleteSubrange(i, 1);
  }
  return removed;
}

std::vector<WeightMatMul> FindWeightMatMuls(const onnx::GraphProto& g, std::vector<std::string>* skipped) {
  std::unordered_map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : g.initializer()) inits[t.name()] = &t;
  std::vector<WeightMatMul> out;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    const bool gemm = n.op_type() == "Gemm" && (n.domain().empty() || n.domain() == "ai.onnx");
    const bool matmul = n.op_type() == "MatMul" && (n.domain().empty() || n.domain() == "ai.onnx");
    if (!gemm && !matmul) continue;
    if (n.input_size() < 2) continue;
    auto it = inits.find(n.input(1));
    if (it == inits.end()) continue;  // activation x activation (attention scores): not a weight
    const onnx::TensorProto& w = *it->second;
    const std::string label = n.name().empty() ? n.output(0) : n.name();
    if (w.data_type() != onnx::TensorProto::FLOAT || w.dims_size() != 2) {
      skipped->push_back(absl::StrCat(label, ": weight ", w.name(), " is not a float32 matrix"));
      continue;
    }
    WeightMatMul m;
    m.node_index = i;
    m.weight = w.name();
    m.gemm = gemm;
    if (gemm) {
      bool ok = true;
      for (const auto& a : n.attribute()) {
        if (a.name() == "transA" && a.i() != 0) ok = false;
        if (a.name() == "transB") m.trans_b = a.i() != 0;
        if (a.name() == "alpha") m.alpha = a.f();
        if (a.name() == "beta") m.beta = a.f();
      }
      if (!ok) {
        skipped->push_back(absl::StrCat(label, ": Gemm with transA=1"));
        continue;
      }
      if (n.input_size() > 2 && !n.input(2).empty()) {
        if (!inits.count(n.input(2))) {
          skipped->push_back(absl::StrCat(label, ": Gemm bias is not a constant"));
          continue;
        }
        m.bias = n.input(2);
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

int64_t OpsetVersion(const onnx::ModelProto& model, const std::string& domain) {
  for (const auto& o : model.opset_import()) {
    const bool same = o.domain() == domain || (domain.empty() && o.domain() == "ai.onnx");
    if (same) return o.version();
  }
  return 0;
}

void EnsureOpset(onnx::ModelProto* model, const std::string& domain, int64_t version) {
  for (auto& o : *model->mutable_opset_import()) {
    if (o.domain() == domain) {
      if (o.version() < version) o.set_version(version);
      return;
    }
  }
  auto* o = model->add_opset_import();
  o->set_domain(domain);
  o->set_version(version);
}

}  // namespace tide::onnx_graph
