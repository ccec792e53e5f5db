// PaddedAttention against its reference loops (every vectorized head size, ragged lengths, masks
// with holes and none), and ai.tide.PaddedAttention through ONNX Runtime against ONNX Runtime's own
// com.microsoft.MultiHeadAttention on the same padded inputs.
#include "runtime/padded_attention.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "onnxruntime_cxx_api.h"
#include "runtime/tide_ops.h"

namespace tide::runtime {
namespace {

struct Inputs {
  AttentionShape shape;
  std::vector<float> q, k, v, bias;
  std::vector<int32_t> mask;
};

// Real tokens first, then padding, per row (`lengths`); `holes`: also mask a few inner tokens.
Inputs RandomInputs(int64_t heads, int64_t head_size, int64_t seq, const std::vector<int64_t>& lengths, bool holes,
                    unsigned seed) {
  Inputs in;
  in.shape = {static_cast<int64_t>(lengths.size()), seq, heads, head_size, 1.0f / std::sqrt(static_cast<float>(head_size))};
  const size_t n = static_cast<size_t>(in.shape.batch * seq * heads * head_size);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.5f);
  for (auto* t : {&in.q, &in.k, &in.v}) {
    t->resize(n);
    for (float& x : *t) x = dist(rng);
  }
  in.bias.resize(static_cast<size_t>(3 * heads * head_size));
  for (float& x : in.bias) x = dist(rng) * 0.3f;
  for (int64_t r = 0; r < in.shape.batch; ++r) {
    for (int64_t t = 0; t < seq; ++t) {
      in.mask.push_back(t < lengths[static_cast<size_t>(r)] && !(holes && t % 5 == 3) ? 1 : 0);
    }
  }
  return in;
}

double MaxRelativeDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]) / std::max(1.0, std::fabs(static_cast<double>(b[i]))));
  }
  return worst;
}

TEST(PaddedAttentionTest, MatchesTheReferenceForEveryVectorizedHeadSize) {
  if (!PaddedAttentionCpuSupported()) GTEST_SKIP() << "no AVX-512 here: PaddedAttention runs the reference loops";
  for (int64_t head_size : {16, 32, 48, 64, 80, 96, 112, 128}) {
    ASSERT_TRUE(PaddedAttentionIsVectorized(head_size));
    for (int64_t seq : {1, 7, 8, 9, 33, 70}) {
      for (bool holes : {false, true}) {
        const std::vector<int64_t> lengths = {seq, seq / 2 + 1, 1, 0};  // 0: an all-padding row
        Inputs in = RandomInputs(3, head_size, seq, lengths, holes, static_cast<unsigned>(head_size * 100 + seq));
        std::vector<float> got(in.q.size(), -1.0f), want(in.q.size(), -2.0f);
        PaddedAttention(in.shape, in.q.data(), in.k.data(), in.v.data(), in.bias.data(), in.mask.data(), got.data());
        PaddedAttentionReference(in.shape, in.q.data(), in.k.data(), in.v.data(), in.bias.data(), in.mask.data(),
                                 want.data());
        EXPECT_LT(MaxRelativeDiff(got, want), 2e-5) << "head_size " << head_size << " seq " << seq << " holes " << holes;
      }
    }
  }
  EXPECT_FALSE(PaddedAttentionIsVectorized(24));
  EXPECT_FALSE(PaddedAttentionIsVectorized(256));
}

// Largest |got - want| over the largest |want|: the BF16 roundings move each output by a fraction
// of the values it averages, so the bound is relative to the output's scale.
double MaxDiffOverScale(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0, scale = 1e-30;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return worst / scale;
}

TEST(PaddedAttentionTest, Bf16ProductsStayWithinTheirRoundingOfTheReference) {
  if (!PaddedAttentionBf16Supported()) GTEST_SKIP() << "no AVX512_BF16 here: precision kBf16 runs FP32";
  for (int64_t head_size : {16, 32, 48, 64, 80, 96, 112, 128}) {
    for (int64_t seq : {1, 2, 7, 9, 33, 70, 130}) {
      for (bool holes : {false, true}) {
        const std::vector<int64_t> lengths = {seq, seq / 2 + 1, 1, 0};
        Inputs in = RandomInputs(3, head_size, seq, lengths, holes, static_cast<unsigned>(head_size * 100 + seq));
        std::vector<float> bf16(in.q.size(), -1.0f), fp32(in.q.size(), -3.0f), want(in.q.size(), -2.0f);
        PaddedAttention(in.shape, in.q.data(), in.k.data(), in.v.data(), in.bias.data(), in.mask.data(), fp32.data());
        in.shape.precision = AttentionPrecision::kBf16;
        PaddedAttention(in.shape, in.q.data(), in.k.data(), in.v.data(), in.bias.data(), in.mask.data(), bf16.data());
        PaddedAttentionReference(in.shape, in.q.data(), in.k.data(), in.v.data(), in.bias.data(), in.mask.data(),
                                 want.data());
        const double diff = MaxDiffOverScale(bf16, want);
        EXPECT_LT(diff, 1.5e-2) << "head_size " << head_size << " seq " << seq << " holes " << holes;
        // It is the BF16 path that ran: FP32 lands ~1000x closer.
        if (seq >= 7) EXPECT_GT(diff, 10 * MaxDiffOverScale(fp32, want)) << "head_size " << head_size << " seq " << seq;
      }
    }
  }
}

// The BF16 path keeps the kernel's contract: padding reaches no real key, units are independent.
TEST(PaddedAttentionTest, Bf16PathIgnoresPaddingAndRunsInParallel) {
  if (!PaddedAttentionBf16Supported()) GTEST_SKIP() << "no AVX512_BF16 here: precision kBf16 runs FP32";
  Inputs padded = RandomInputs(2, 64, 48, {31}, false, 12);
  padded.shape.precision = AttentionPrecision::kBf16;
  Inputs alone = padded;
  alone.shape.seq = 31;
  const size_t hidden = 2 * 64, keep = 31 * hidden;
  for (auto* t : {&alone.q, &alone.k, &alone.v}) t->resize(keep);
  alone.mask.assign(31, 1);
  std::vector<float> a(padded.q.size()), b(keep), c(padded.q.size());
  PaddedAttention(padded.shape, padded.q.data(), padded.k.data(), padded.v.data(), padded.bias.data(), padded.mask.data(), a.data());
  PaddedAttention(alone.shape, alone.q.data(), alone.k.data(), alone.v.data(), alone.bias.data(), alone.mask.data(), b.data());
  ParallelFor reversed = [](size_t units, const std::function<void(size_t)>& fn) {
    for (size_t u = units; u-- > 0;) fn(u);
  };
  PaddedAttention(padded.shape, padded.q.data(), padded.k.data(), padded.v.data(), padded.bias.data(), padded.mask.data(),
                  c.data(), reversed);
  EXPECT_EQ(a, c);
  a.resize(keep);
  EXPECT_EQ(a, b);
}

TEST(PaddedAttentionTest, ParallelUnitsWriteTheSameResultAndNullBiasIsZero) {
  Inputs in = RandomInputs(4, 32, 40, {40, 12, 25}, false, 3);
  std::vector<float> serial(in.q.size()), parallel(in.q.size()), want(in.q.size());
  PaddedAttention(in.shape, in.q.data(), in.k.data(), in.v.data(), nullptr, in.mask.data(), serial.data());
  size_t seen = 0;
  ParallelFor reversed = [&seen](size_t units, const std::function<void(size_t)>& fn) {
    for (size_t u = units; u-- > 0;) fn(u), ++seen;
  };
  PaddedAttention(in.shape, in.q.data(), in.k.data(), in.v.data(), nullptr, in.mask.data(), parallel.data(), reversed);
  EXPECT_EQ(seen, 12u);  // batch x heads
  EXPECT_EQ(serial, parallel);
  PaddedAttentionReference(in.shape, in.q.data(), in.k.data(), in.v.data(), nullptr, in.mask.data(), want.data());
  EXPECT_LT(MaxRelativeDiff(serial, want), 2e-5);
}

// The first `n` positions of each row of a [batch, seq, width] tensor.
std::vector<float> FirstPositions(const std::vector<float>& t, int64_t batch, int64_t seq, int64_t n) {
  const auto width = static_cast<int64_t>(t.size()) / (batch * seq);
  std::vector<float> out;
  for (int64_t b = 0; b < batch; ++b) {
    out.insert(out.end(), t.begin() + b * seq * width, t.begin() + (b * seq + n) * width);
  }
  return out;
}

// queries = n: the first n queries alone give exactly what they give among all of a row's queries
// (an encoder's last layer on its pooled token), on both precisions and the reference loops.
TEST(PaddedAttentionTest, FirstQueriesAloneAreThoseOfAllQueries) {
  for (int64_t head_size : {32, 64}) {
    for (AttentionPrecision precision : {AttentionPrecision::kFp32, AttentionPrecision::kBf16}) {
      Inputs in = RandomInputs(3, head_size, 41, {41, 17, 1}, true, static_cast<unsigned>(head_size) + 7);
      in.shape.precision = precision;
      std::vector<float> all(in.q.size()), all_reference(in.q.size());
      PaddedAttention(in.shape, in.q.data(), in.k.data(), in.v.data(), in.bias.data(), in.mask.data(), all.data());
      PaddedAttentionReference(in.shape, in.q.data(), in.k.data(), in.v.data(), in.bias.data(), in.mask.data(),
                               all_reference.data());
      for (int64_t n : {1, 3, 9, 41}) {
        AttentionShape first = in.shape;
        first.queries = n;
        const std::vector<float> q = FirstPositions(in.q, in.shape.batch, in.shape.seq, n);
        std::vector<float> out(q.size()), reference(q.size());
        PaddedAttention(first, q.data(), in.k.data(), in.v.data(), in.bias.data(), in.mask.data(), out.data());
        PaddedAttentionReference(first, q.data(), in.k.data(), in.v.data(), in.bias.data(), in.mask.data(), reference.data());
        EXPECT_EQ(out, FirstPositions(all, in.shape.batch, in.shape.seq, n)) << "head_size " << head_size << ", n " << n;
        EXPECT_EQ(reference, FirstPositions(all_reference, in.shape.batch, in.shape.seq, n)) << "n " << n;
      }
    }
  }
}

// A padded key changes nothing: the real rows' outputs are those of the row alone, unpadded.
TEST(PaddedAttentionTest, PaddingDoesNotReachTheRealKeys) {
  Inputs padded = RandomInputs(2, 64, 48, {30}, false, 11);
  Inputs alone = padded;
  alone.shape.seq = 30;
  const size_t hidden = 2 * 64, keep = 30 * hidden;
  for (auto* t : {&alone.q, &alone.k, &alone.v}) t->resize(keep);
  alone.mask.assign(30, 1);
  std::vector<float> a(padded.q.size()), b(keep);
  PaddedAttention(padded.shape, padded.q.data(), padded.k.data(), padded.v.data(), padded.bias.data(), padded.mask.data(), a.data());
  PaddedAttention(alone.shape, alone.q.data(), alone.k.data(), alone.v.data(), alone.bias.data(), alone.mask.data(), b.data());
  a.resize(keep);
  EXPECT_EQ(a, b);
}

// --- causal and grouped-query (a decoder's attention) -------------------------------------------

// q [B, S, heads x d], k and v [B, S, kv_heads x d], no bias; `lengths` real tokens first per row.
Inputs DecoderInputs(int64_t heads, int64_t kv_heads, int64_t head_size, int64_t seq, const std::vector<int64_t>& lengths,
                     bool holes, unsigned seed) {
  Inputs in = RandomInputs(heads, head_size, seq, lengths, holes, seed);
  in.shape.kv_heads = kv_heads;
  in.shape.causal = true;
  const size_t kv = static_cast<size_t>(in.shape.batch * seq * kv_heads * head_size);
  in.k.resize(kv);
  in.v.resize(kv);
  in.bias.clear();
  return in;
}

// The definition, independent of the kernel's code: query i of row b, head h attends the real keys
// at positions <= i of key-value head h / (heads / kv_heads) (the first real key when none is;
// every position of a row with none), in doubles.
std::vector<float> CausalOracle(const Inputs& in) {
  const AttentionShape& s = in.shape;
  const int64_t d = s.head_size, qw = s.heads * d, kvw = s.kv_heads * d, group = s.heads / s.kv_heads;
  std::vector<float> out(in.q.size());
  for (int64_t b = 0; b < s.batch; ++b) {
    std::vector<int64_t> real;
    for (int64_t j = 0; j < s.seq; ++j) {
      if (in.mask[static_cast<size_t>(b * s.seq + j)] != 0) real.push_back(j);
    }
    if (real.empty()) {
      for (int64_t j = 0; j < s.seq; ++j) real.push_back(j);
    }
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kh = h / group;
      for (int64_t i = 0; i < s.seq; ++i) {
        std::vector<int64_t> keys;
        for (int64_t j : real) {
          if (j <= i) keys.push_back(j);
        }
        if (keys.empty()) keys.push_back(real.front());
        std::vector<double> score;
        double best = -1e300;
        for (int64_t j : keys) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) {
            dot += static_cast<double>(in.q[static_cast<size_t>((b * s.seq + i) * qw + h * d + c)]) *
                   in.k[static_cast<size_t>((b * s.seq + j) * kvw + kh * d + c)];
          }
          score.push_back(dot * s.scale);
          best = std::max(best, score.back());
        }
        double sum = 0;
        std::vector<double> acc(static_cast<size_t>(d), 0.0);
        for (size_t n = 0; n < keys.size(); ++n) {
          const double p = std::exp(score[n] - best);
          sum += p;
          for (int64_t c = 0; c < d; ++c) {
            acc[static_cast<size_t>(c)] += p * in.v[static_cast<size_t>((b * s.seq + keys[n]) * kvw + kh * d + c)];
          }
        }
        for (int64_t c = 0; c < d; ++c) {
          out[static_cast<size_t>((b * s.seq + i) * qw + h * d + c)] = static_cast<float>(acc[static_cast<size_t>(c)] / sum);
        }
      }
    }
  }
  return out;
}

TEST(PaddedAttentionTest, CausalGroupedQueryMatchesTheDefinition) {
  struct Heads {
    int64_t heads, kv_heads;
  };
  for (Heads hk : {Heads{4, 2}, Heads{3, 3}, Heads{6, 1}}) {
    for (int64_t head_size : {16, 32, 64, 128}) {
      for (int64_t seq : {1, 7, 8, 9, 33, 70}) {
        for (bool holes : {false, true}) {
          Inputs in = DecoderInputs(hk.heads, hk.kv_heads, head_size, seq, {seq, seq / 2 + 1, 1, 0}, holes,
                                    static_cast<unsigned>(head_size * 100 + seq + hk.kv_heads));
          const std::vector<float> want = CausalOracle(in);
          std::vector<float> got(in.q.size(), -1.0f), reference(in.q.size(), -2.0f);
          PaddedAttention(in.shape, in.q.data(), in.k.data(), in.v.data(), nullptr, in.mask.data(), got.data());
          PaddedAttentionReference(in.shape, in.q.data(), in.k.data(), in.v.data(), nullptr, in.mask.data(),
                                   reference.data());
          const std::string what = "heads " + std::to_string(hk.heads) + "/" + std::to_string(hk.kv_heads) + " head_size " +
                                   std::to_string(head_size) + " seq " + std::to_string(seq) + " holes " +
                                   std::to_string(holes);
          EXPECT_LT(MaxRelativeDiff(reference, want), 1e-6) << what;
          EXPECT_LT(MaxRelativeDiff(got, want), 2e-5) << what;
          if (PaddedAttentionBf16Supported()) {
            AttentionShape bf16 = in.shape;
            bf16.precision = AttentionPrecision::kBf16;
            PaddedAttention(bf16, in.q.data(), in.k.data(), in.v.data(), nullptr, in.mask.data(), got.data());
            EXPECT_LT(MaxDiffOverScale(got, want), 1.5e-2) << what << " (bf16)";
          }
        }
      }
    }
  }
}

// Causal: a row's first m outputs are those of its first m tokens alone, bit for bit, in both
// precisions and whatever the padding: the keys past a query add exact zeros, if anything.
TEST(PaddedAttentionTest, CausalOutputsAreThoseOfThePrefixAlone) {
  for (AttentionPrecision precision : {AttentionPrecision::kFp32, AttentionPrecision::kBf16}) {
    Inputs full = DecoderInputs(4, 2, 64, 80, {61}, false, 21);
    full.shape.precision = precision;
    std::vector<float> whole(full.q.size());
    PaddedAttention(full.shape, full.q.data(), full.k.data(), full.v.data(), nullptr, full.mask.data(), whole.data());
    for (int64_t m : {1, 8, 9, 31, 32, 33, 61}) {
      Inputs prefix = full;
      prefix.shape.seq = m;
      prefix.q.resize(static_cast<size_t>(m * 4 * 64));
      prefix.k.resize(static_cast<size_t>(m * 2 * 64));
      prefix.v.resize(static_cast<size_t>(m * 2 * 64));
      prefix.mask.assign(static_cast<size_t>(m), 1);
      std::vector<float> alone(prefix.q.size());
      PaddedAttention(prefix.shape, prefix.q.data(), prefix.k.data(), prefix.v.data(), nullptr, prefix.mask.data(),
                      alone.data());
      EXPECT_EQ(std::vector<float>(whole.begin(), whole.begin() + static_cast<int64_t>(alone.size())), alone)
          << "prefix " << m << (precision == AttentionPrecision::kBf16 ? " (bf16)" : "");
    }
  }
}

// Rows [batch, seq - p, width]: each row's positions p..seq-1.
std::vector<float> LastPositions(const std::vector<float>& t, int64_t batch, int64_t seq, int64_t p) {
  const int64_t width = static_cast<int64_t>(t.size()) / (batch * seq);
  std::vector<float> kept;
  for (int64_t b = 0; b < batch; ++b) {
    kept.insert(kept.end(), t.begin() + (b * seq + p) * width, t.begin() + (b + 1) * seq * width);
  }
  return kept;
}

// A shared prompt prefix (optimize/prompt_prefix.h): the queries after the first p positions,
// beside every key (query_offset p), are those positions' rows of the whole causal attention, bit
// for bit: the kernel blocks queries from the first one it is given, the products are the same.
TEST(PaddedAttentionTest, QueriesAfterAPrefixAreThoseOfTheWholeRow) {
  for (AttentionPrecision precision : {AttentionPrecision::kFp32, AttentionPrecision::kBf16}) {
    for (int64_t head_size : {64, 128}) {
      Inputs full = DecoderInputs(4, 2, head_size, 70, {70, 50, 41}, false, static_cast<unsigned>(head_size) + 3);
      full.shape.precision = precision;
      std::vector<float> whole(full.q.size()), whole_reference(full.q.size());
      PaddedAttention(full.shape, full.q.data(), full.k.data(), full.v.data(), nullptr, full.mask.data(), whole.data());
      PaddedAttentionReference(full.shape, full.q.data(), full.k.data(), full.v.data(), nullptr, full.mask.data(),
                               whole_reference.data());
      for (int64_t p : {1, 8, 23, 40}) {
        AttentionShape after = full.shape;
        after.query_offset = p;
        const std::vector<float> q = LastPositions(full.q, 3, 70, p);
        std::vector<float> out(q.size()), reference(q.size());
        PaddedAttention(after, q.data(), full.k.data(), full.v.data(), nullptr, full.mask.data(), out.data(),
                        [](size_t units, const std::function<void(size_t)>& fn) {
                          for (size_t u = units; u-- > 0;) fn(u);
                        });
        PaddedAttentionReference(after, q.data(), full.k.data(), full.v.data(), nullptr, full.mask.data(), reference.data());
        const std::string what = "head_size " + std::to_string(head_size) + " prefix " + std::to_string(p) +
                                 (precision == AttentionPrecision::kBf16 ? " (bf16)" : "");
        EXPECT_EQ(out, LastPositions(whole, 3, 70, p)) << what;
        EXPECT_EQ(reference, LastPositions(whole_reference, 3, 70, p)) << what;
      }
    }
  }
}

// --- through ONNX Runtime --------------------------------------------------------------------

void AddInput(onnx::GraphProto* g, const std::string& name, int type, int rank) {
  auto* in = g->add_input();
  in->set_name(name);
  auto* t = in->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  for (int i = 0; i < rank; ++i) t->mutable_shape()->add_dim()->set_dim_param("d" + std::to_string(i));
}

// q, k, v, bias, mask -> out through one attention node of `domain`.`op`.
// precision: PaddedAttention's attribute, absent when empty.
std::string AttentionModel(const std::string& domain, const std::string& op, int64_t heads, float scale,
                           const std::string& precision = "") {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(17);
  auto* c = m.add_opset_import();
  c->set_domain(domain);
  c->set_version(1);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("attention");
  for (const char* name : {"q", "k", "v"}) AddInput(g, name, onnx::TensorProto::FLOAT, 3);
  AddInput(g, "bias", onnx::TensorProto::FLOAT, 1);
  AddInput(g, "mask", onnx::TensorProto::INT32, 2);
  auto* out = g->add_output();
  out->set_name("out");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_domain(domain);
  for (const char* name : {"q", "k", "v", "bias", "mask"}) n->add_input(name);
  n->add_output("out");
  auto* a = n->add_attribute();
  a->set_name("num_heads");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(heads);
  auto* s = n->add_attribute();
  s->set_name("scale");
  s->set_type(onnx::AttributeProto::FLOAT);
  s->set_f(scale);
  if (!precision.empty()) {
    auto* pr = n->add_attribute();
    pr->set_name("precision");
    pr->set_type(onnx::AttributeProto::STRING);
    pr->set_s(precision);
  }
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

Ort::Env& Env() {
  static Ort::Env* env = new Ort::Env(ORT_LOGGING_LEVEL_ERROR, "padded_attention_test");
  return *env;
}

std::vector<float> RunAttention(const std::string& model, Inputs& in, int threads) {
  Ort::SessionOptions so;
  so.SetIntraOpNumThreads(threads);
  RegisterTideOps(so);
  Ort::Session session(Env(), model.data(), model.size(), so);
  const Ort::MemoryInfo mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  const std::vector<int64_t> dims = {in.shape.batch, in.shape.seq, in.shape.heads * in.shape.head_size};
  const std::vector<int64_t> bias_dims = {static_cast<int64_t>(in.bias.size())};
  const std::vector<int64_t> mask_dims = {in.shape.batch, in.shape.seq};
  std::vector<Ort::Value> values;
  values.push_back(Ort::Value::CreateTensor<float>(mem, in.q.data(), in.q.size(), dims.data(), dims.size()));
  values.push_back(Ort::Value::CreateTensor<float>(mem, in.k.data(), in.k.size(), dims.data(), dims.size()));
  values.push_back(Ort::Value::CreateTensor<float>(mem, in.v.data(), in.v.size(), dims.data(), dims.size()));
  values.push_back(Ort::Value::CreateTensor<float>(mem, in.bias.data(), in.bias.size(), bias_dims.data(), 1));
  values.push_back(Ort::Value::CreateTensor<int32_t>(mem, in.mask.data(), in.mask.size(), mask_dims.data(), 2));
  const char* names[] = {"q", "k", "v", "bias", "mask"};
  const char* out_name[] = {"out"};
  auto out = session.Run(Ort::RunOptions{nullptr}, names, values.data(), values.size(), out_name, 1);
  const float* p = out[0].GetTensorData<float>();
  return std::vector<float>(p, p + in.q.size());
}

TEST(PaddedAttentionOpTest, MatchesOnnxRuntimesMultiHeadAttentionOnAPaddedBatch) {
  for (int64_t head_size : {16, 32, 64}) {
    const int64_t heads = 768 / head_size / 4;
    Inputs in = RandomInputs(heads, head_size, 37, {37, 20, 1}, false, static_cast<unsigned>(head_size));
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_size));
    const std::vector<float> ort = RunAttention(AttentionModel("com.microsoft", "MultiHeadAttention", heads, scale), in, 1);
    for (int threads : {1, 2}) {
      const std::vector<float> tide =
          RunAttention(AttentionModel(kTideOpDomain, kPaddedAttentionOp, heads, scale), in, threads);
      EXPECT_LT(MaxRelativeDiff(tide, ort), 1e-5) << "head_size " << head_size << ", " << threads << " threads";
    }
  }
}

// The attribute precision picks the kernel's path: "bf16" is the BF16 products, "fp32" (or none)
// FP32; any other value fails every run with an error naming it.
TEST(PaddedAttentionOpTest, PrecisionAttributeChoosesThePath) {
  Inputs in = RandomInputs(4, 32, 37, {37, 20, 1}, false, 5);
  std::vector<float> direct_fp32(in.q.size()), direct_bf16(in.q.size());
  PaddedAttention(in.shape, in.q.data(), in.k.data(), in.v.data(), in.bias.data(), in.mask.data(), direct_fp32.data());
  AttentionShape bf16 = in.shape;
  bf16.precision = AttentionPrecision::kBf16;
  PaddedAttention(bf16, in.q.data(), in.k.data(), in.v.data(), in.bias.data(), in.mask.data(), direct_bf16.data());
  EXPECT_EQ(RunAttention(AttentionModel(kTideOpDomain, kPaddedAttentionOp, 4, in.shape.scale, "fp32"), in, 1), direct_fp32);
  EXPECT_EQ(RunAttention(AttentionModel(kTideOpDomain, kPaddedAttentionOp, 4, in.shape.scale, kPaddedAttentionBf16), in, 1),
            direct_bf16);
  try {
    RunAttention(AttentionModel(kTideOpDomain, kPaddedAttentionOp, 4, in.shape.scale, "fp16"), in, 1);
    ADD_FAILURE() << "precision fp16 ran";
  } catch (const Ort::Exception& e) {
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("precision \"fp16\" is not fp32 or bf16"));
  }
}

// q, k, v, seqlens_k (and for GroupQueryAttention total_sequence_length) -> out through one node:
// ai.tide.CausalAttention or com.microsoft.GroupQueryAttention (past key / value absent).
std::string DecoderAttentionModel(bool group_query, int64_t heads, int64_t kv_heads, float scale,
                                  const std::string& precision = "") {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(17);
  auto* c = m.add_opset_import();
  c->set_domain(group_query ? "com.microsoft" : kTideOpDomain);
  c->set_version(1);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("decoder_attention");
  for (const char* name : {"q", "k", "v"}) AddInput(g, name, onnx::TensorProto::FLOAT, 3);
  AddInput(g, "seqlens_k", onnx::TensorProto::INT32, 1);
  if (group_query) AddInput(g, "total", onnx::TensorProto::INT32, 1);
  auto* out = g->add_output();
  out->set_name("out");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(group_query ? "GroupQueryAttention" : kCausalAttentionOp);
  n->set_domain(c->domain());
  const std::vector<std::string> inputs = group_query ? std::vector<std::string>{"q", "k", "v", "", "", "seqlens_k", "total"}
                                                      : std::vector<std::string>{"q", "k", "v", "seqlens_k"};
  for (const std::string& name : inputs) n->add_input(name);
  n->add_output("out");
  auto add_int = [n](const char* name, int64_t value) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  };
  add_int("num_heads", heads);
  add_int("kv_num_heads", kv_heads);
  auto* s = n->add_attribute();
  s->set_name("scale");
  s->set_type(onnx::AttributeProto::FLOAT);
  s->set_f(scale);
  if (!precision.empty()) {
    auto* pr = n->add_attribute();
    pr->set_name("precision");
    pr->set_type(onnx::AttributeProto::STRING);
    pr->set_s(precision);
  }
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

// Runs DecoderAttentionModel's graph on `in` (right padding: seqlens_k = length - 1 per row).
// With `queries` (q [B, Sq, N x d] beside keys of in.shape.seq positions) it replaces in.q.
std::vector<float> RunDecoderAttention(const std::string& model, bool group_query, Inputs& in,
                                       std::vector<int32_t> seqlens_k, int threads = 1,
                                       std::vector<float>* queries = nullptr) {
  Ort::SessionOptions so;
  so.SetIntraOpNumThreads(threads);
  RegisterTideOps(so);
  Ort::Session session(Env(), model.data(), model.size(), so);
  const Ort::MemoryInfo mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  const AttentionShape& s = in.shape;
  std::vector<float>& q = queries != nullptr ? *queries : in.q;
  const std::vector<int64_t> q_dims = {s.batch, static_cast<int64_t>(q.size()) / (s.batch * s.heads * s.head_size),
                                       s.heads * s.head_size};
  const std::vector<int64_t> kv_dims = {s.batch, s.seq, static_cast<int64_t>(in.k.size()) / std::max<int64_t>(1, s.batch * s.seq)};
  const std::vector<int64_t> lens_dims = {static_cast<int64_t>(seqlens_k.size())}, total_dims = {1};
  int32_t total = static_cast<int32_t>(s.seq);
  std::vector<Ort::Value> values;
  values.push_back(Ort::Value::CreateTensor<float>(mem, q.data(), q.size(), q_dims.data(), 3));
  values.push_back(Ort::Value::CreateTensor<float>(mem, in.k.data(), in.k.size(), kv_dims.data(), 3));
  values.push_back(Ort::Value::CreateTensor<float>(mem, in.v.data(), in.v.size(), kv_dims.data(), 3));
  values.push_back(Ort::Value::CreateTensor<int32_t>(mem, seqlens_k.data(), seqlens_k.size(), lens_dims.data(), 1));
  if (group_query) values.push_back(Ort::Value::CreateTensor<int32_t>(mem, &total, 1, total_dims.data(), 1));
  const char* names[] = {"q", "k", "v", "seqlens_k", "total"};
  const char* out_name[] = {"out"};
  auto out = session.Run(Ort::RunOptions{nullptr}, names, values.data(), values.size(), out_name, 1);
  const float* p = out[0].GetTensorData<float>();
  return std::vector<float>(p, p + q.size());
}

// The real tokens' outputs (GroupQueryAttention leaves a padded query's output unspecified).
std::vector<float> RealRows(const std::vector<float>& out, const Inputs& in) {
  const int64_t width = in.shape.heads * in.shape.head_size;
  std::vector<float> kept;
  for (int64_t t = 0; t < in.shape.batch * in.shape.seq; ++t) {
    if (in.mask[static_cast<size_t>(t)] != 0) kept.insert(kept.end(), out.begin() + t * width, out.begin() + (t + 1) * width);
  }
  return kept;
}

TEST(CausalAttentionOpTest, MatchesOnnxRuntimesGroupQueryAttentionOnARightPaddedBatch) {
  struct Case {
    int64_t heads, kv_heads, head_size;
  };
  for (Case c : {Case{16, 8, 128}, Case{4, 2, 32}, Case{14, 2, 64}, Case{4, 4, 16}}) {
    Inputs in = DecoderInputs(c.heads, c.kv_heads, c.head_size, 45, {45, 20, 1}, false, static_cast<unsigned>(c.head_size));
    const std::vector<int32_t> seqlens_k = {44, 19, 0};
    const std::vector<float> ort =
        RunDecoderAttention(DecoderAttentionModel(true, c.heads, c.kv_heads, in.shape.scale), true, in, seqlens_k);
    for (int threads : {1, 2}) {
      const std::vector<float> tide = RunDecoderAttention(DecoderAttentionModel(false, c.heads, c.kv_heads, in.shape.scale),
                                                          false, in, seqlens_k, threads);
      EXPECT_LT(MaxRelativeDiff(RealRows(tide, in), RealRows(ort, in)), 1e-5)
          << c.heads << "/" << c.kv_heads << " heads of " << c.head_size << ", " << threads << " threads";
    }
    if (PaddedAttentionBf16Supported()) {
      const std::vector<float> bf16 = RunDecoderAttention(
          DecoderAttentionModel(false, c.heads, c.kv_heads, in.shape.scale, kPaddedAttentionBf16), false, in, seqlens_k);
      const double diff = MaxDiffOverScale(RealRows(bf16, in), RealRows(ort, in));
      EXPECT_LT(diff, 1.5e-2) << c.heads << "/" << c.kv_heads << " heads of " << c.head_size << " (bf16)";
      EXPECT_GT(diff, 1e-5) << "the bf16 attribute ran FP32";
    }
  }
}

TEST(CausalAttentionOpTest, BadInputsAreAnErrorNamingThem) {
  Inputs in = DecoderInputs(4, 2, 16, 6, {6, 3}, false, 2);
  auto error = [&](const std::string& model, std::vector<int32_t> seqlens_k) -> std::string {
    try {
      RunDecoderAttention(model, false, in, std::move(seqlens_k));
    } catch (const Ort::Exception& e) {
      return e.what();
    }
    return "ran";
  };
  const std::string good = DecoderAttentionModel(false, 4, 2, 0.25f);
  EXPECT_THAT(error(good, {5, 6}), ::testing::HasSubstr("seqlens_k[1] = 6 is outside [0, 6)"));
  EXPECT_THAT(error(good, {5, -1}), ::testing::HasSubstr("seqlens_k[1] = -1 is outside [0, 6)"));
  EXPECT_THAT(error(good, {5}), ::testing::HasSubstr("seqlens_k [1] is not [2]"));
  EXPECT_THAT(error(DecoderAttentionModel(false, 4, 3, 0.25f), {5, 2}),
              ::testing::HasSubstr("num_heads 4 is not a positive multiple of kv_num_heads 3"));
  EXPECT_THAT(error(DecoderAttentionModel(false, 2, 2, 0.25f), {5, 2}),
              ::testing::HasSubstr("key [2, 6, 32] and value [2, 6, 32] are not [2, seq >= 6 (the query's), 64"));
  EXPECT_THAT(error(DecoderAttentionModel(false, 4, 2, 0.25f, "int8"), {5, 2}),
              ::testing::HasSubstr("precision \"int8\" is not fp32 or bf16"));
  EXPECT_EQ(error(good, {5, 2}), "ran");
}

// Keys longer than the queries (a shared prompt prefix's lead, optimize/prompt_prefix.h): query row
// i is position S - Sq + i, seqlens_k counts the prefix; the rows equal the whole attention's.
TEST(CausalAttentionOpTest, KeysLongerThanTheQueriesLeadThem) {
  Inputs in = DecoderInputs(16, 8, 128, 45, {45, 20, 12}, false, 77);
  const std::vector<int32_t> seqlens_k = {44, 19, 11};
  const std::string model = DecoderAttentionModel(false, 16, 8, in.shape.scale);
  const std::vector<float> whole = RunDecoderAttention(model, false, in, seqlens_k);
  for (int64_t p : {1, 11}) {
    std::vector<float> q = LastPositions(in.q, 3, 45, p);
    EXPECT_EQ(RunDecoderAttention(model, false, in, seqlens_k, 2, &q), LastPositions(whole, 3, 45, p)) << "prefix " << p;
  }
  // More queries than keys: an error naming the shapes.
  std::vector<float> longer(in.q.size() + static_cast<size_t>(3 * 16 * 128 * 2), 0.0f);
  try {
    RunDecoderAttention(model, false, in, seqlens_k, 1, &longer);
    ADD_FAILURE() << "47 queries beside 45 keys ran";
  } catch (const Ort::Exception& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("are not [3, seq >= 47 (the query's), 1024"));
  }
}

// q [batch, n, hidden] beside k, v [batch, seq, hidden]: the op answers the first n positions' rows
// of the self-attention; a q longer than the keys is an error naming the shapes.
TEST(PaddedAttentionOpTest, FirstPositionsQueryTheWholeRow) {
  Inputs in = RandomInputs(4, 32, 37, {37, 20, 1}, false, 9);
  const std::string model = AttentionModel(kTideOpDomain, kPaddedAttentionOp, 4, in.shape.scale);
  const std::vector<float> all = RunAttention(model, in, 1);
  Ort::SessionOptions so;
  RegisterTideOps(so);
  Ort::Session session(Env(), model.data(), model.size(), so);
  const Ort::MemoryInfo mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  auto run = [&](std::vector<float> q, int64_t n) {
    const std::vector<int64_t> q_dims = {3, n, 128}, kv_dims = {3, 37, 128}, bias_dims = {384}, mask_dims = {3, 37};
    std::vector<Ort::Value> values;
    values.push_back(Ort::Value::CreateTensor<float>(mem, q.data(), q.size(), q_dims.data(), 3));
    values.push_back(Ort::Value::CreateTensor<float>(mem, in.k.data(), in.k.size(), kv_dims.data(), 3));
    values.push_back(Ort::Value::CreateTensor<float>(mem, in.v.data(), in.v.size(), kv_dims.data(), 3));
    values.push_back(Ort::Value::CreateTensor<float>(mem, in.bias.data(), in.bias.size(), bias_dims.data(), 1));
    values.push_back(Ort::Value::CreateTensor<int32_t>(mem, in.mask.data(), in.mask.size(), mask_dims.data(), 2));
    const char* names[] = {"q", "k", "v", "bias", "mask"};
    const char* out_name[] = {"out"};
    auto out = session.Run(Ort::RunOptions{nullptr}, names, values.data(), values.size(), out_name, 1);
    EXPECT_EQ(out[0].GetTensorTypeAndShapeInfo().GetShape(), q_dims);
    const float* p = out[0].GetTensorData<float>();
    return std::vector<float>(p, p + q.size());
  };
  EXPECT_EQ(run(FirstPositions(in.q, 3, 37, 1), 1), FirstPositions(all, 3, 37, 1));
  EXPECT_EQ(run(FirstPositions(in.q, 3, 37, 5), 5), FirstPositions(all, 3, 37, 5));
  std::vector<float> longer(3 * 38 * 128, 0.5f);
  try {
    run(longer, 38);
    FAIL() << "38 queries over 37 keys ran";
  } catch (const Ort::Exception& e) {
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("key [3, 37, 128] and value [3, 37, 128] must have the query's shape [3, 38, 128]"));
  }
}

TEST(PaddedAttentionOpTest, WrongShapesAreAnErrorNotACrash) {
  Inputs in = RandomInputs(2, 16, 5, {5, 3}, false, 1);
  in.mask.resize(6);  // [2, 3] instead of [2, 5]
  in.shape.seq = 5;
  const std::string model = AttentionModel(kTideOpDomain, kPaddedAttentionOp, 2, 0.25f);
  Ort::SessionOptions so;
  RegisterTideOps(so);
  Ort::Session session(Env(), model.data(), model.size(), so);
  const Ort::MemoryInfo mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  const std::vector<int64_t> dims = {2, 5, 32}, bias_dims = {96}, mask_dims = {2, 3};
  std::vector<Ort::Value> values;
  values.push_back(Ort::Value::CreateTensor<float>(mem, in.q.data(), in.q.size(), dims.data(), 3));
  values.push_back(Ort::Value::CreateTensor<float>(mem, in.k.data(), in.k.size(), dims.data(), 3));
  values.push_back(Ort::Value::CreateTensor<float>(mem, in.v.data(), in.v.size(), dims.data(), 3));
  values.push_back(Ort::Value::CreateTensor<float>(mem, in.bias.data(), in.bias.size(), bias_dims.data(), 1));
  values.push_back(Ort::Value::CreateTensor<int32_t>(mem, in.mask.data(), in.mask.size(), mask_dims.data(), 2));
  const char* names[] = {"q", "k", "v", "bias", "mask"};
  const char* out_name[] = {"out"};
  try {
    session.Run(Ort::RunOptions{nullptr}, names, values.data(), values.size(), out_name, 1);
    FAIL() << "a [2, 3] mask for [2, 5] rows ran";
  } catch (const Ort::Exception& e) {
    EXPECT_NE(std::string(e.what()).find("key_padding_mask [2, 3] is not [2, 5]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tide::runtime
