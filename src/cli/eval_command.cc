#include "cli/eval_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "config/tide_parameters.h"
#include "onnx_graph/graph_util.h"
#include "onnx_graph/model_io.h"
#include "optimize/transformer_fusion.h"
#include "runtime/ort_backend.h"
#include "serving/model_loader.h"

namespace tide::cli {
namespace {

struct Pair {
  std::vector<int64_t> ids, types;
};
using Query = std::vector<Pair>;

std::vector<Query> MakeRequests(const EvalOptions& o) {
  std::mt19937 rng(o.seed);
  std::uniform_int_distribution<int64_t> token(1000, std::max<int64_t>(1001, o.vocab - 1));
  std::uniform_int_distribution<int> docs(o.min_docs, std::max(o.min_docs, o.max_docs));
  // SciFact shape: query tokens p50 19 / mean 21; document tokens lognormal, p50 ~314, p90 ~500.
  std::normal_distribution<double> qlen(21.0, 8.0);
  std::lognormal_distribution<double> dlen(std::log(314.0), 0.36);
  std::vector<Query> out(static_cast<size_t>(o.queries));
  for (Query& q : out) {
    const int ql = std::min(std::clamp(static_cast<int>(std::lround(qlen(rng))), 3, 64), o.max_length / 4);
    std::vector<int64_t> query(static_cast<size_t>(ql));
    for (auto& t : query) t = token(rng);
    const int n = docs(rng);
    for (int d = 0; d < n; ++d) {
      int dl = std::clamp(static_cast<int>(std::lround(dlen(rng))), 8, 2000);
      dl = std::max(1, std::min(dl, o.max_length - ql - 3));  // truncate the document, like LongestFirst here
      Pair p;
      p.ids.push_back(101);
      p.ids.insert(p.ids.end(), query.begin(), query.end());
      p.ids.push_back(102);
      p.types.assign(p.ids.size(), 0);
      for (int i = 0; i < dl; ++i) p.ids.push_back(token(rng));
      p.ids.push_back(102);
      p.types.resize(p.ids.size(), 1);
      q.push_back(std::move(p));
    }
  }
  return out;
}

int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * 4096;
}

struct RunResult {
  std::vector<std::vector<float>> scores;  // per query, per document
  double seconds = 0;
  double p50_batch_ms = 0;
  int64_t pairs = 0;
  int64_t resident_added = 0;
};

struct EvalModel {
  std::string label, path;
  std::string fused_data;  // a served variant's fused graph (else empty: the file as it is)
  std::string fusion;      // how it was fused
};

// Fuses a served variant's graph as the load does (serving::LoadFusionOptions).
absl::Status FuseAsServed(const std::string& precision, bool whole_last_layer, EvalModel* m) {
  config::TideParameters parameters;
  parameters.prune_last_layer = !whole_last_layer;
  if (precision == "fp32") {
    parameters.attention_precision = config::AttentionPrecision::kFp32;
  } else if (precision == "bf16") {
    parameters.attention_precision = config::AttentionPrecision::kBf16;
  } else if (precision != "auto") {
    return absl::InvalidArgumentError(absl::StrCat("--attention-precision ", m->label, "=", precision, ": not auto, fp32 or bf16"));
  }
  absl::StatusOr<onnx::ModelProto> model = onnx_graph::ReadModelFile(m->path);
  if (!model.ok()) return absl::Status(model.status().code(), absl::StrCat(m->path, ": ", model.status().message()));
  const optimize::FusionOptions fusion = serving::LoadFusionOptions(parameters, onnx_graph::GraphPrecision(*model));
  absl::StatusOr<optimize::FusionReport> report = optimize::FuseTransformer(fusion, &*model);
  if (!report.ok()) return absl::Status(report.status().code(), absl::StrCat(m->path, ": ", report.status().message()));
  m->fusion = report->fused() > 0 ? report->Summary() : "nothing fused";
  if (report->fused() > 0 && !model->SerializeToString(&m->fused_data)) {
    return absl::InternalError(absl::StrCat(m->path, ": the fused graph does not serialize (over 2 GB?)"));
  }
  return absl::OkStatus();
}

// Scores every request with every model. All sessions are created first; then each batch runs on
// every model in turn, so background load on a shared machine hits the variants alike.
absl::StatusOr<std::vector<RunResult>> ScoreAll(const std::vector<EvalModel>& models,
                                                const std::vector<Query>& requests, const EvalOptions& o) {
  std::vector<std::unique_ptr<runtime::OrtBackend>> backends;
  std::vector<RunResult> results(models.size());
  runtime::TokenBatch batch;
  runtime::Logits logits;
  auto fill = [&](const Query& q, size_t start, size_t end, bool types) {
    size_t seq = 0;
    for (size_t i = start; i < end; ++i) seq = std::max(seq, q[i].ids.size());
    batch.Resize(static_cast<int64_t>(end - start), static_cast<int64_t>(seq), types);
    for (size_t i = start; i < end; ++i) {
      const size_t row = (i - start) * seq;
      for (size_t j = 0; j < q[i].ids.size(); ++j) {
        batch.input_ids[row + j] = q[i].ids[j];
        batch.attention_mask[row + j] = 1;
        if (types) batch.token_type_ids[row + j] = q[i].types[j];
      }
    }
  };
  for (size_t m = 0; m < models.size(); ++m) {
    const int64_t before = ResidentBytes();
    runtime::OrtOptions options{.intra_op_threads = o.intra_op_threads};
    if (models[m].fused_data.empty()) {
      options.model_path = models[m].path;
    } else {
      options.model_data = models[m].fused_data;
      options.model_label = models[m].path;
    }
    auto backend = runtime::OrtBackend::Create(options);
    if (!backend.ok()) {
      return absl::Status(backend.status().code(), absl::StrCat(models[m].path, ": ", backend.status().message()));
    }
    // The first Run plans memory; keep it out of the timing but inside the memory figure.
    fill(requests[0], 0, std::min(requests[0].size(), static_cast<size_t>(o.batch)),
         !(*backend)->signature().token_type_ids_name.empty());
    if (absl::Status s = (*backend)->Run(batch, &logits); !s.ok()) return s;
    results[m].resident_added = ResidentBytes() - before;
    backends.push_back(std::move(*backend));
  }
  std::vector<std::vector<double>> batch_ms(models.size());
  for (const Query& q : requests) {
    for (auto& r : results) r.scores.emplace_back();
    for (size_t start = 0; start < q.size(); start += static_cast<size_t>(o.batch)) {
      const size_t end = std::min(q.size(), start + static_cast<size_t>(o.batch));
      for (size_t m = 0; m < models.size(); ++m) {
        fill(q, start, end, !backends[m]->signature().token_type_ids_name.empty());
        const auto t0 = std::chrono::steady_clock::now();
        if (absl::Status s = backends[m]->Run(batch, &logits); !s.ok()) return s;
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        batch_ms[m].push_back(ms);
        results[m].seconds += ms / 1000.0;
        for (int64_t i = 0; i < logits.batch; ++i) results[m].scores.back().push_back(logits.at(i, logits.num_labels - 1));
        results[m].pairs += logits.batch;
      }
    }
  }
  for (size_t m = 0; m < models.size(); ++m) {
    auto& v = batch_ms[m];
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    results[m].p50_batch_ms = v.empty() ? 0 : v[v.size() / 2];
  }
  return results;
}

std::vector<double> Ranks(const std::vector<float>& v) {  // 1-based, ties averaged
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = (i + j) / 2.0 + 1;
    i = j + 1;
  }
  return r;
}

double Pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n, mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  if (saa == 0 || sbb == 0) return saa == sbb ? 1.0 : 0.0;  // a constant ranking agrees only with another
  return sab / std::sqrt(saa * sbb);
}

double KendallTauB(const std::vector<float>& a, const std::vector<float>& b) {
  int64_t concordant = 0, discordant = 0, ties_a = 0, ties_b = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = i + 1; j < a.size(); ++j) {
      const int sa = (a[i] > a[j]) - (a[i] < a[j]), sb = (b[i] > b[j]) - (b[i] < b[j]);
      if (sa == 0 && sb == 0) continue;
      if (sa == 0) ++ties_a;
      else if (sb == 0) ++ties_b;
      else if (sa == sb) ++concordant;
      else ++discordant;
    }
  }
  const double denom = std::sqrt(static_cast<double>(concordant + discordant + ties_a) *
                                 static_cast<double>(concordant + discordant + ties_b));
  if (denom == 0) return ties_a == ties_b ? 1.0 : 0.0;  // a constant ranking agrees only with another
  return (concordant - discordant) / denom;
}

std::vector<size_t> Order(const std::vector<float>& v) {  // best first
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] > v[b]; });
  return idx;
}

double NdcgAt10(const std::vector<float>& ref, const std::vector<float>& got) {
  const std::vector<size_t> ideal = Order(ref), ranked = Order(got);
  std::vector<double> gain(ref.size(), 0.0);
  for (size_t r = 0; r < std::min<size_t>(10, ideal.size()); ++r) gain[ideal[r]] = 10.0 - r;
  double dcg = 0, idcg = 0;
  for (size_t i = 0; i < std::min<size_t>(10, ref.size()); ++i) {
    dcg += gain[ranked[i]] / std::log2(i + 2.0);
    idcg += gain[ideal[i]] / std::log2(i + 2.0);
  }
  return idcg > 0 ? dcg / idcg : 1.0;
}

}  // namespace

absl::Status RunEval(const EvalOptions& o, std::ostream& out) {
  if (o.queries < 1 || o.min_docs < 1 || o.max_docs < o.min_docs || o.batch < 1 || o.max_length < 16) {
    return absl::InvalidArgumentError("need queries >= 1, 1 <= min-docs <= max-docs, batch >= 1, max-length >= 16");
  }
  const std::vector<Query> requests = MakeRequests(o);
  int64_t pairs = 0, tokens = 0;
  for (const Query& q : requests) {
    pairs += static_cast<int64_t>(q.size());
    for (const Pair& p : q) tokens += static_cast<int64_t>(p.ids.size());
  }
  out << absl::StrFormat("tide eval: %d queries, %d pairs, mean pair length %.0f tokens, batch %d, %d intra-op thread(s), seed %d\n\n",
                         requests.size(), pairs, static_cast<double>(tokens) / pairs, o.batch, o.intra_op_threads, o.seed);
  for (const auto& [label, precision] : o.attention_precision) {
    bool found = false;
    for (const auto& [l, p] : o.served_variants) found = found || l == label;
    if (!found) return absl::InvalidArgumentError(absl::StrCat("--attention-precision ", label, ": no --served-variant has that label"));
  }
  for (const std::string& label : o.whole_last_layer) {
    bool found = false;
    for (const auto& [l, p] : o.served_variants) found = found || l == label;
    if (!found) return absl::InvalidArgumentError(absl::StrCat("--whole-last-layer ", label, ": no --served-variant has that label"));
  }
  std::vector<EvalModel> models = {{"fp32", o.model, "", ""}};
  for (const auto& [label, path] : o.variants) models.push_back({label, path, "", ""});
  for (const auto& [label, path] : o.served_variants) {
    std::string precision = "auto";
    for (const auto& [l, p] : o.attention_precision) {
      if (l == label) precision = p;
    }
    const bool whole = std::find(o.whole_last_layer.begin(), o.whole_last_layer.end(), label) != o.whole_last_layer.end();
    models.push_back({label, path, "", ""});
    if (absl::Status s = FuseAsServed(precision, whole, &models.back()); !s.ok()) return s;
  }
  absl::StatusOr<std::vector<RunResult>> scored = ScoreAll(models, requests, o);
  if (!scored.ok()) return scored.status();
  const std::vector<RunResult>& results = *scored;
  out << "| variant | file MB | RSS added MB | pairs/s | speed-up | p50 batch ms | max abs diff | mean abs diff | "
         "Spearman (mean/min) | Kendall tau-b (mean/min) | top-1 agree | top-10 overlap | NDCG@10 (mean/min) |\n"
      << "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  const double base_rate = results[0].pairs / results[0].seconds;
  for (size_t v = 0; v < models.size(); ++v) {
    const RunResult& r = results[v];
    double max_abs = 0, sum_abs = 0, sp_sum = 0, sp_min = 1, kt_sum = 0, kt_min = 1, nd_sum = 0, nd_min = 1;
    int top1 = 0;
    double top10 = 0;
    for (size_t q = 0; q < requests.size(); ++q) {
      const auto& ref = results[0].scores[q];
      const auto& got = r.scores[q];
      for (size_t i = 0; i < ref.size(); ++i) {
        const double d = std::fabs(static_cast<double>(ref[i]) - got[i]);
        max_abs = std::max(max_abs, d);
        sum_abs += d;
      }
      const double sp = Pearson(Ranks(ref), Ranks(got)), kt = KendallTauB(ref, got), nd = NdcgAt10(ref, got);
      sp_sum += sp;
      sp_min = std::min(sp_min, sp);
      kt_sum += kt;
      kt_min = std::min(kt_min, kt);
      nd_sum += nd;
      nd_min = std::min(nd_min, nd);
      const auto ro = Order(ref), go = Order(got);
      top1 += ro[0] == go[0];
      const size_t k = std::min<size_t>(10, ro.size());
      int common = 0;
      for (size_t i = 0; i < k; ++i) common += std::find(go.begin(), go.begin() + k, ro[i]) != go.begin() + k;
      top10 += static_cast<double>(common) / k;
    }
    const double nq = static_cast<double>(requests.size());
    std::error_code ec;
    const double mb = static_cast<double>(std::filesystem::file_size(models[v].path, ec)) / 1e6;
    const double rate = r.pairs / r.seconds;
    out << absl::StrFormat("| %s | %.1f | %.0f | %.1f | %.2fx | %.1f | %.2e | %.2e | %.4f / %.4f | %.4f / %.4f | %.1f%% | %.1f%% | %.4f / %.4f |\n",
                           models[v].label, mb, r.resident_added / 1e6, rate, rate / base_rate, r.p50_batch_ms, max_abs,
                           sum_abs / pairs, sp_sum / nq, sp_min, kt_sum / nq, kt_min, 100.0 * top1 / nq,
                           100.0 * top10 / nq, nd_sum / nq, nd_min);
  }
  for (const EvalModel& m : models) {
    if (!m.fusion.empty()) out << "\n" << m.label << ": served as tide serve fuses it: " << m.fusion;
  }
  if (!o.served_variants.empty()) out << "\n";
  return absl::OkStatus();
}

void RegisterEvalCommand(CLI::App* app) {
  auto o = std::make_shared<EvalOptions>();
  auto variants = std::make_shared<std::vector<std::string>>();
  auto served = std::make_shared<std::vector<std::string>>();
  auto precisions = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app->add_subcommand("eval", "compare quantized model variants with their FP32 original (scores, rankings, speed)");
  cmd->add_option("--model", o->model, "the FP32 .onnx model")->required()->check(CLI::ExistingFile)->envname("TIDE_EVAL_MODEL");
  cmd->add_option("--variant", *variants, "LABEL=PATH of a variant to compare (repeatable)")->envname("TIDE_EVAL_VARIANT");
  cmd->add_option("--served-variant", *served,
                  "LABEL=PATH of a variant fused as tide serve fuses it at load (repeatable)")
      ->envname("TIDE_EVAL_SERVED_VARIANT");
  cmd->add_option("--attention-precision", *precisions,
                  "LABEL=auto|fp32|bf16: a served variant's attention precision (default auto)")
      ->envname("TIDE_EVAL_ATTENTION_PRECISION");
  cmd->add_option("--whole-last-layer", o->whole_last_layer,
                  "LABEL: a served variant runs its last layer for every token (prune_last_layer false; repeatable)")
      ->envname("TIDE_EVAL_WHOLE_LAST_LAYER");
  cmd->add_option("--queries", o->queries, "rerank requests")->capture_default_str()->envname("TIDE_EVAL_QUERIES");
  cmd->add_option("--min-docs", o->min_docs, "fewest documents per query")->capture_default_str()->envname("TIDE_EVAL_MIN_DOCS");
  cmd->add_option("--max-docs", o->max_docs, "most documents per query")->capture_default_str()->envname("TIDE_EVAL_MAX_DOCS");
  cmd->add_option("--batch", o->batch, "documents per model run")->capture_default_str()->envname("TIDE_EVAL_BATCH");
  cmd->add_option("--max-length", o->max_length, "longest pair in tokens")->capture_default_str()->envname("TIDE_EVAL_MAX_LENGTH");
  cmd->add_option("--vocab", o->vocab, "token ids are drawn below this")->capture_default_str()->envname("TIDE_EVAL_VOCAB");
  cmd->add_option("--threads", o->intra_op_threads, "ONNX Runtime intra-op threads (0: its default)")
      ->capture_default_str()->envname("TIDE_EVAL_THREADS");
  cmd->add_option("--seed", o->seed, "seed of the request set")->capture_default_str()->envname("TIDE_EVAL_SEED");
  cmd->callback([o, variants, served, precisions] {
    auto split = [](const std::vector<std::string>& in, const char* flag, const char* want,
                     std::vector<std::pair<std::string, std::string>>* to) {
      to->clear();
      for (const std::string& v : in) {
        const size_t eq = v.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
          std::cerr << "tide eval: " << flag << " wants " << want << ", got '" << v << "'\n";
          throw CLI::RuntimeError(2);
        }
        to->emplace_back(v.substr(0, eq), v.substr(eq + 1));
      }
    };
    split(*variants, "--variant", "LABEL=PATH", &o->variants);
    split(*served, "--served-variant", "LABEL=PATH", &o->served_variants);
    split(*precisions, "--attention-precision", "LABEL=auto|fp32|bf16", &o->attention_precision);
    if (o->variants.empty() && o->served_variants.empty()) {
      std::cerr << "tide eval: give at least one --variant or --served-variant\n";
      throw CLI::RuntimeError(2);
    }
    if (absl::Status s = RunEval(*o, std::cout); !s.ok()) {
      std::cerr << "tide eval: " << s.message() << "\n";
      throw CLI::RuntimeError(2);
    }
  });
}

}  // namespace tide::cli
