// Server overhead benchmark: one client, one 16-document rerank request at a time.
// Measures, in one run on the same model and the same token batch:
//   - a direct ONNX Runtime call (OrtBackend, the model's own session settings) on the batch padded
//     to its longest row, and on the batch padded to the server's sequence bucket;
//   - the same request through `tide serve` over HTTP: client-side total, and the server's own
//     split from its Server-Timing header (tokenize / queue / inference / postprocess).
// Prints medians and the overhead ratio (client total - server inference) / server inference.
// Not a test: it asserts nothing; the numbers go to bench/results and the README.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "config/model_config.h"
#include "config/tide_parameters.h"
#include "http_client.h"
#include "nlohmann/json.hpp"
#include "runtime/ort_backend.h"
#include "serving/ort_options.h"
#include "serving/served_model.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// A text of exactly `tokens` tokens (without special tokens), made of whole vocabulary words.
std::string MakeText(const tide::tokenizer::Tokenizer& tok, size_t tokens, std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> pick(1000, static_cast<int64_t>(tok.vocab_size()) - 1);
  std::string text;
  std::vector<int64_t> ids;
  while (true) {
    auto word = tok.IdToToken(pick(rng));
    if (!word || word->empty() || word->rfind("##", 0) == 0 || (*word)[0] == '[' || (*word)[0] == '<') continue;
    if (!std::all_of(word->begin(), word->end(), [](unsigned char c) { return std::isalpha(c); })) continue;
    std::string candidate = text.empty() ? *word : text + " " + *word;
    if (!tok.Tokenize(candidate, &ids).ok()) continue;
    if (ids.size() > tokens) continue;
    text = std::move(candidate);
    if (ids.size() == tokens) return text;
  }
}

// Server-Timing: "tokenize;dur=0.030, queue;dur=1.104, ..." -> milliseconds of `name`.
double TimingOf(std::string_view header, std::string_view name) {
  const std::string key = std::string(name) + ";dur=";
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return 0.0;
  return std::stod(std::string(header.substr(at + key.size())));
}

tide::runtime::TokenBatch MakeBatch(const std::vector<tide::tokenizer::Encoding>& rows, int64_t seq, bool types,
                                    int64_t pad_id) {
  tide::runtime::TokenBatch b;
  b.Resize(static_cast<int64_t>(rows.size()), seq, types);
  std::fill(b.input_ids.begin(), b.input_ids.end(), pad_id);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::copy(rows[r].ids.begin(), rows[r].ids.end(), b.input_ids.begin() + r * seq);
    std::copy(rows[r].attention_mask.begin(), rows[r].attention_mask.end(), b.attention_mask.begin() + r * seq);
    if (types) std::copy(rows[r].type_ids.begin(), rows[r].type_ids.end(), b.token_type_ids.begin() + r * seq);
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tide server-overhead benchmark"};
  std::string host = "127.0.0.1", model_dir = "models/minilm-l6";
  int port = 8000, docs = 16, doc_tokens = 200, query_tokens = 20, iterations = 15, warmup = 3;
  app.add_option("--host", host);
  app.add_option("--port", port)->required();
  app.add_option("--model-dir", model_dir, "model folder of the served model (config.pbtxt, 1/model.onnx)");
  app.add_option("--documents", docs);
  app.add_option("--doc-tokens", doc_tokens);
  app.add_option("--query-tokens", query_tokens);
  app.add_option("--iterations", iterations);
  app.add_option("--warmup", warmup);
  CLI11_PARSE(app, argc, argv);

  auto config = tide::config::ReadModelConfigFile(model_dir + "/config.pbtxt");
  if (!config.ok()) { std::fprintf(stderr, "%s\n", config.status().ToString().c_str()); return 1; }
  auto params = tide::config::TideParameters::FromConfig(*config, model_dir + "/config.pbtxt");
  if (!params.ok()) { std::fprintf(stderr, "%s\n", params.status().ToString().c_str()); return 1; }
  auto tok = tide::tokenizer::Tokenizer::FromFile(model_dir + "/" + params->tokenizer);
  if (!tok.ok()) { std::fprintf(stderr, "%s\n", tok.status().ToString().c_str()); return 1; }
  auto backend = tide::runtime::OrtBackend::Create(tide::serving::MakeOrtOptions(*params, model_dir + "/1/model.onnx"));
  if (!backend.ok()) { std::fprintf(stderr, "%s\n", backend.status().ToString().c_str()); return 1; }

  std::mt19937 rng(42);
  const std::string query = MakeText(**tok, query_tokens, rng);
  std::vector<std::string> texts;
  for (int i = 0; i < docs; ++i) texts.push_back(MakeText(**tok, doc_tokens, rng));
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::vector<tide::tokenizer::Encoding> rows;
  tide::tokenizer::EncodeOptions eo;
  eo.max_length = params->EffectiveMaxSequenceLength((*tok)->default_max_length());
  if (auto s = (*tok)->EncodePairs(query, views, eo, &rows); !s.ok()) { std::fprintf(stderr, "%s\n", s.ToString().c_str()); return 1; }
  int64_t longest = 0, real = 0;
  for (const auto& r : rows) { longest = std::max<int64_t>(longest, r.ids.size()); real += r.ids.size(); }
  int64_t bucket = longest;
  for (size_t b : tide::serving::kDefaultSequenceBuckets) if (static_cast<int64_t>(b) >= longest) { bucket = b; break; }
  const bool types = !(*backend)->signature().token_type_ids_name.empty();
  const auto batch_longest = MakeBatch(rows, longest, types, (*tok)->pad_id());
  const auto batch_bucket = MakeBatch(rows, bucket, types, (*tok)->pad_id());

  auto time_direct = [&](const tide::runtime::TokenBatch& b) {
    tide::runtime::Logits out;
    std::vector<double> ms;
    for (int i = 0; i < warmup + iterations; ++i) {
      const auto t0 = Clock::now();
      if (auto s = (*backend)->Run(b, &out); !s.ok()) { std::fprintf(stderr, "%s\n", s.ToString().c_str()); std::exit(1); }
      if (i >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    return Median(ms);
  };

  nlohmann::json body = {{"query", query}, {"texts", texts}};
  const std::string request = body.dump();
  tide::testing::HttpClient client(host, static_cast<uint16_t>(port), std::chrono::milliseconds(120000));
  std::vector<double> total, tokenize, queue, inference, post, server_total;
  // Interleave server and direct runs so that machine noise hits both alike.
  std::vector<double> direct_longest, direct_bucket;
  for (int i = 0; i < warmup + iterations; ++i) {
    const auto t0 = Clock::now();
    auto r = client.Post("/rerank", request);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (r.status != 200) { std::fprintf(stderr, "server answered %d: %s %s\n", r.status, r.error.c_str(), r.body.c_str()); return 1; }
    const double dl = time_direct(batch_longest), db = time_direct(batch_bucket);
    if (i < warmup) continue;
    std::string_view timing = r.header("server-timing");
    total.push_back(ms);
    tokenize.push_back(TimingOf(timing, "tokenize"));
    queue.push_back(TimingOf(timing, "queue"));
    inference.push_back(TimingOf(timing, "inference"));
    post.push_back(TimingOf(timing, "postprocess"));
    server_total.push_back(TimingOf(timing, "total"));
    direct_longest.push_back(dl);
    direct_bucket.push_back(db);
  }
  const double inf = Median(inference), tot = Median(total);
  std::printf("model %s: %d documents x %d tokens + %d-token query -> %lld real tokens, longest row %lld, bucket %lld\n",
              model_dir.c_str(), docs, doc_tokens, query_tokens, static_cast<long long>(real),
              static_cast<long long>(longest), static_cast<long long>(bucket));
  std::printf("medians over %d requests (ms):\n", iterations);
  std::printf("  %-44s %10.3f\n", "direct ORT, padded to longest row", Median(direct_longest));
  std::printf("  %-44s %10.3f\n", "direct ORT, padded to the server's bucket", Median(direct_bucket));
  std::printf("  %-44s %10.3f\n", "server: tokenize", Median(tokenize));
  std::printf("  %-44s %10.3f\n", "server: queue", Median(queue));
  std::printf("  %-44s %10.3f\n", "server: inference", inf);
  std::printf("  %-44s %10.3f\n", "server: postprocess", Median(post));
  std::printf("  %-44s %10.3f\n", "server: total (received -> response ready)", Median(server_total));
  std::printf("  %-44s %10.3f\n", "client: total (HTTP round trip)", tot);
  std::printf("overhead (client total - server inference) / server inference: %.2f%%\n", 100.0 * (tot - inf) / inf);
  std::printf("overhead (client total - direct ORT same shape) / direct ORT:  %.2f%%\n",
              100.0 * (tot - Median(direct_bucket)) / Median(direct_bucket));
  std::printf("bucket padding cost (direct bucket / direct longest):          %.3fx\n",
              Median(direct_bucket) / Median(direct_longest));
  return 0;
}
