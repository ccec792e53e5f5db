#include "cli/verify_model_command.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/ort_backend.h"

namespace tide::cli {
namespace {

using nlohmann::json;

// Reads a [batch][seq] integer matrix into `dst` (row-major); all rows must have one length.
absl::Status ReadMatrix(const json& m, const std::string& what, int64_t* batch, int64_t* seq,
                        std::vector<int64_t>* dst) {
  if (!m.is_array() || m.empty()) return absl::InvalidArgumentError(what + ": expected a non-empty [[...]] array");
  const int64_t b = static_cast<int64_t>(m.size());
  const int64_t s = m[0].is_array() ? static_cast<int64_t>(m[0].size()) : 0;
  if (s == 0) return absl::InvalidArgumentError(what + ": rows must be non-empty arrays");
  if (*batch >= 0 && (b != *batch || s != *seq)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": shape [", b, ", ", s, "] differs from input_ids [",
                                                   *batch, ", ", *seq, "]"));
  }
  *batch = b;
  *seq = s;
  dst->clear();
  dst->reserve(b * s);
  for (int64_t i = 0; i < b; ++i) {
    const json& row = m[i];
    if (!row.is_array() || static_cast<int64_t>(row.size()) != s) {
      return absl::InvalidArgumentError(absl::StrCat(what, "[", i, "]: rows must all have length ", s));
    }
    for (const json& v : row) {
      if (!v.is_number_integer()) return absl::InvalidArgumentError(absl::StrCat(what, "[", i, "]: integers expected"));
      dst->push_back(v.get<int64_t>());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<double> VerifyImpl(const VerifyModelOptions& options, std::ostream& out) {
  std::ifstream in(options.reference);
  if (!in) return absl::NotFoundError(absl::StrCat(options.reference, ": cannot open"));
  json ref;
  try {
    ref = json::parse(in);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(options.reference, ": ", e.what()));
  }
  if (!ref.is_object() || !ref.contains("cases") || !ref["cases"].is_array() || ref["cases"].empty()) {
    return absl::InvalidArgumentError(absl::StrCat(options.reference, ": expected {\"cases\": [...]} with at least one case"));
  }

  runtime::OrtOptions ort;
  ort.model_path = options.model;
  ort.intra_op_threads = options.intra_op_threads;
  auto backend = runtime::OrtBackend::Create(ort);
  if (!backend.ok()) return backend.status();
  const ModelSignature& sig = (*backend)->signature();

  double overall = 0.0;
  runtime::TokenBatch batch;
  runtime::Logits logits;
  for (size_t c = 0; c < ref["cases"].size(); ++c) {
    const json& tc = ref["cases"][c];
    const std::string where = absl::StrCat(options.reference, ": cases[", c, "]");
    if (!tc.is_object() || !tc.contains("inputs") || !tc["inputs"].is_object() || !tc.contains("logits")) {
      return absl::InvalidArgumentError(where + ": needs \"inputs\" and \"logits\"");
    }
    const json& inputs = tc["inputs"];
    for (const std::string key : {"input_ids", "attention_mask"}) {
      if (!inputs.contains(key)) return absl::InvalidArgumentError(absl::StrCat(where, ".inputs: missing ", key));
    }
    int64_t b = -1, s = -1;
    if (auto st = ReadMatrix(inputs["input_ids"], where + ".inputs.input_ids", &b, &s, &batch.input_ids); !st.ok()) return st;
    if (auto st = ReadMatrix(inputs["attention_mask"], where + ".inputs.attention_mask", &b, &s, &batch.attention_mask); !st.ok()) return st;
    batch.token_type_ids.clear();
    if (inputs.contains("token_type_ids") && !sig.token_type_ids_name.empty()) {
      if (auto st = ReadMatrix(inputs["token_type_ids"], where + ".inputs.token_type_ids", &b, &s, &batch.token_type_ids); !st.ok()) return st;
    }
    batch.batch = b;
    batch.seq_len = s;
    // An embedder's reference may hold its token states too: compared at the real (mask 1) positions.
    const bool states = tc.contains("token_embeddings") && !sig.token_embeddings_name.empty();
    batch.token_states = states;
    if (auto st = (*backend)->Run(batch, &logits); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat(where, ": ", st.message()));
    }
    const json& want = tc["logits"];
    if (!want.is_array() || static_cast<int64_t>(want.size()) != b) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".logits: expected ", b, " rows"));
    }
    double worst = 0.0;
    for (int64_t i = 0; i < b; ++i) {
      const json& row = want[i];
      if (!row.is_array() || static_cast<int64_t>(row.size()) != logits.num_labels) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".logits[", i, "]: expected ", logits.num_labels,
                                                       " values (the model's output \"", sig.logits_name, "\")"));
      }
      for (int64_t l = 0; l < logits.num_labels; ++l) {
        if (!row[l].is_number()) return absl::InvalidArgumentError(absl::StrCat(where, ".logits[", i, "]: numbers expected"));
        const double d = std::fabs(static_cast<double>(logits.at(i, l)) - row[l].get<double>());
        worst = std::isnan(d) ? INFINITY : std::max(worst, d);
      }
    }
    if (states) {
      const json& want_states = tc["token_embeddings"];
      if (!want_states.is_array() || static_cast<int64_t>(want_states.size()) != b || logits.hidden < 1 ||
          logits.token_states.size() != static_cast<size_t>(b * s * logits.hidden)) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".token_embeddings: expected ", b, " rows"));
      }
      for (int64_t i = 0; i < b; ++i) {
        const json& row = want_states[i];
        if (!row.is_array() || static_cast<int64_t>(row.size()) != s) {
          return absl::InvalidArgumentError(absl::StrCat(where, ".token_embeddings[", i, "]: expected ", s, " tokens"));
        }
        const float* got = logits.states_of(i, s);
        for (int64_t t = 0; t < s; ++t) {
          if (batch.attention_mask[i * s + t] == 0) continue;
          const json& token = row[t];
          if (!token.is_array() || static_cast<int64_t>(token.size()) != logits.hidden) {
            return absl::InvalidArgumentError(absl::StrCat(where, ".token_embeddings[", i, "][", t, "]: expected ",
                                                           logits.hidden, " values"));
          }
          for (int64_t h = 0; h < logits.hidden; ++h) {
            if (!token[h].is_number()) {
              return absl::InvalidArgumentError(absl::StrCat(where, ".token_embeddings: numbers expected"));
            }
            const double d = std::fabs(static_cast<double>(got[t * logits.hidden + h]) - token[h].get<double>());
            worst = std::isnan(d) ? INFINITY : std::max(worst, d);
          }
        }
      }
    }
    out << "case " << c << ": batch " << b << " x " << s << ", max_abs_diff " << worst << "\n";
    overall = std::max(overall, worst);
  }
  out << "overall: " << ref["cases"].size() << " cases, max_abs_diff " << overall << ", atol " << options.atol
      << (overall <= options.atol ? ": OK" : ": ABOVE ATOL") << "\n";
  return overall;
}

}  // namespace

absl::StatusOr<double> VerifyModel(const VerifyModelOptions& options, std::ostream& out) {
  try {
    return VerifyImpl(options, out);
  } catch (const json::exception& e) {  // type errors deep in the reference
    return absl::InvalidArgumentError(absl::StrCat(options.reference, ": ", e.what()));
  }
}

void RegisterVerifyModelCommand(CLI::App* app) {
  auto options = std::make_shared<VerifyModelOptions>();
  CLI::App* cmd = app->add_subcommand("verify-model", "compare ONNX Runtime logits of a model with reference logits");
  cmd->add_option("--model", options->model, "the .onnx model file")
      ->required()->check(CLI::ExistingFile)->envname("TIDE_VERIFY_MODEL");
  cmd->add_option("--reference", options->reference, "reference JSON: {\"cases\": [{\"inputs\": {...}, \"logits\": [[...]]}]}")
      ->required()->check(CLI::ExistingFile)->envname("TIDE_VERIFY_REFERENCE");
  cmd->add_option("--atol", options->atol, "largest accepted absolute difference")
      ->capture_default_str()->check(CLI::NonNegativeNumber)->envname("TIDE_VERIFY_ATOL");
  cmd->add_option("--threads", options->intra_op_threads, "ONNX Runtime intra-op threads (0: its default)")
      ->capture_default_str()->check(CLI::NonNegativeNumber)->envname("TIDE_VERIFY_THREADS");
  cmd->callback([options] {
    auto diff = VerifyModel(*options, std::cout);
    if (!diff.ok()) {
      std::cerr << "verify-model: " << diff.status() << "\n";
      throw CLI::RuntimeError(2);
    }
    if (*diff > options->atol) throw CLI::RuntimeError(1);
  });
}

}  // namespace tide::cli
