// Protocol overhead benchmark: one client, one request at a time, the same pairs through
// every wire format tide serves, interleaved round-robin in one run so that drift hits all alike:
//   HTTP TEI /rerank (JSON), HTTP KServe infer with JSON BYTES tensors, HTTP KServe infer with
//   binary BYTES tensors, gRPC KServe ModelInfer (raw_input_contents), gRPC tei.v1 Rerank.
// For each, at 1 and 16 documents: the client-side median latency and the median per-request
// overhead = client total - the server's own inference time (Server-Timing / timing trailers /
// TEI metadata), i.e. everything but the model: protocol, parsing, tokenization, queueing.
// Not a test: it asserts nothing; the numbers go to bench/results and the README.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "CLI/CLI.hpp"
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "http_client.h"
#include "nlohmann/json.hpp"
#include "tei.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// "inference;dur=12.345" out of a Server-Timing value.
double InferenceMs(std::string_view server_timing) {
  const size_t at = server_timing.find("inference;dur=");
  return at == std::string_view::npos ? -1.0 : std::atof(std::string(server_timing.substr(at + 14)).c_str());
}

std::string Trailer(const grpc::ClientContext& ctx, const std::string& key) {
  const auto& md = ctx.GetServerTrailingMetadata();
  auto it = md.find(key);
  return it == md.end() ? "" : std::string(it->second.data(), it->second.size());
}

std::string LengthPrefixed(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& e : elements) {
    const uint32_t n = static_cast<uint32_t>(e.size());
    char b[4];
    std::memcpy(b, &n, 4);
    out.append(b, 4);
    out.append(e);
  }
  return out;
}

struct Mode {
  const char* name;
  // Sends one request; returns {client ms, server inference ms} or client ms < 0 on failure.
  std::function<std::pair<double, double>(const std::string& query, const std::vector<std::string>& docs)> run;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("tide protocol overhead benchmark");
  std::string host = "127.0.0.1";
  int port = 8000, grpc_port = 8001, rounds = 60;
  std::string model = "minilm-l6";
  app.add_option("--host", host);
  app.add_option("--port", port);
  app.add_option("--grpc-port", grpc_port);
  app.add_option("--model", model);
  app.add_option("--rounds", rounds, "requests per mode and size (after 5 warm-up rounds)");
  CLI11_PARSE(app, argc, argv);

  tide::testing::HttpClient http(host, static_cast<uint16_t>(port), std::chrono::seconds(60));
  auto channel = grpc::CreateChannel(host + ":" + std::to_string(grpc_port), grpc::InsecureChannelCredentials());
  auto kserve = inference::GRPCInferenceService::NewStub(channel);
  auto tei = tei::v1::Rerank::NewStub(channel);

  const std::vector<Mode> modes = {
      {"http tei /rerank json",
       [&](const std::string& q, const std::vector<std::string>& docs) -> std::pair<double, double> {
         const std::string body = json{{"query", q}, {"texts", docs}}.dump();
         const auto t0 = Clock::now();
         const auto r = http.Post("/rerank", body);
         const double ms = Ms(Clock::now() - t0);
         if (r.status != 200) return {-1, 0};
         return {ms, InferenceMs(r.header("server-timing"))};
       }},
      {"http kserve json",
       [&](const std::string& q, const std::vector<std::string>& docs) -> std::pair<double, double> {
         const json body = {{"inputs",
                             {{{"name", "text"}, {"datatype", "BYTES"}, {"shape", {docs.size()}},
                               {"data", std::vector<std::string>(docs.size(), q)}},
                              {{"name", "text_pair"}, {"datatype", "BYTES"}, {"shape", {docs.size()}}, {"data", docs}}}}};
         const auto t0 = Clock::now();
         const auto r = http.Post("/v2/models/" + model + "/infer", body.dump());
         const double ms = Ms(Clock::now() - t0);
         if (r.status != 200) return {-1, 0};
         return {ms, InferenceMs(r.header("server-timing"))};
       }},
      {"http kserve binary",
       [&](const std::string& q, const std::vector<std::string>& docs) -> std::pair<double, double> {
         const std::string a = LengthPrefixed(std::vector<std::string>(docs.size(), q));
         const std::string b = LengthPrefixed(docs);
         const std::string header =
             json{{"inputs",
                   {{{"name", "text"}, {"datatype", "BYTES"}, {"shape", {docs.size()}},
                     {"parameters", {{"binary_data_size", a.size()}}}},
                    {{"name", "text_pair"}, {"datatype", "BYTES"}, {"shape", {docs.size()}},
                     {"parameters", {{"binary_data_size", b.size()}}}}}},
                  {"outputs", {{{"name", "logits"}, {"parameters", {{"binary_data", true}}}}}}}
                 .dump();
         const auto t0 = Clock::now();
         const auto r = http.Post("/v2/models/" + model + "/infer", header + a + b,
                                  {{"Content-Type", "application/octet-stream"},
                                   {"Inference-Header-Content-Length", std::to_string(header.size())}});
         const double ms = Ms(Clock::now() - t0);
         if (r.status != 200) return {-1, 0};
         return {ms, InferenceMs(r.header("server-timing"))};
       }},
      {"grpc kserve raw",
       [&](const std::string& q, const std::vector<std::string>& docs) -> std::pair<double, double> {
         inference::ModelInferRequest req;
         req.set_model_name(model);
         for (const char* name : {"text", "text_pair"}) {
           auto* in = req.add_inputs();
           in->set_name(name);
           in->set_datatype("BYTES");
           in->add_shape(static_cast<int64_t>(docs.size()));
         }
         req.add_raw_input_contents(LengthPrefixed(std::vector<std::string>(docs.size(), q)));
         req.add_raw_input_contents(LengthPrefixed(docs));
         grpc::ClientContext ctx;
         inference::ModelInferResponse resp;
         const auto t0 = Clock::now();
         const grpc::Status s = kserve->ModelInfer(&ctx, req, &resp);
         const double ms = Ms(Clock::now() - t0);
         if (!s.ok()) return {-1, 0};
         return {ms, InferenceMs(Trailer(ctx, "server-timing"))};
       }},
      {"grpc tei rerank",
       [&](const std::string& q, const std::vector<std::string>& docs) -> std::pair<double, double> {
         tei::v1::RerankRequest req;
         req.set_query(q);
         for (const std::string& d : docs) req.add_texts(d);
         req.set_truncate(true);
         grpc::ClientContext ctx;
         tei::v1::RerankResponse resp;
         const auto t0 = Clock::now();
         const grpc::Status s = tei->Rerank(&ctx, req, &resp);
         const double ms = Ms(Clock::now() - t0);
         if (!s.ok()) return {-1, 0};
         return {ms, resp.metadata().inference_time_ns() / 1e6};
       }},
  };

  const std::string query = "what is the giant panda and where does it live?";
  const std::string doc =
      "The giant panda is a bear species endemic to China, living in mountain forests where it eats bamboo.";
  std::printf("%-24s %5s %12s %12s %12s %6s\n", "mode", "docs", "client_ms", "inference_ms", "overhead_ms", "fails");
  for (size_t n : {size_t{1}, size_t{16}}) {
    const std::vector<std::string> docs(n, doc);
    std::vector<std::vector<double>> total(modes.size()), overhead(modes.size()), inference(modes.size());
    std::vector<int> fails(modes.size(), 0);
    for (int round = 0; round < rounds + 5; ++round) {
      for (size_t m = 0; m < modes.size(); ++m) {
        const auto [ms, inf] = modes[m].run(query, docs);
        if (ms < 0) {
          ++fails[m];
          continue;
        }
        if (round < 5) continue;  // warm-up
        total[m].push_back(ms);
        inference[m].push_back(inf);
        overhead[m].push_back(ms - inf);
      }
    }
    for (size_t m = 0; m < modes.size(); ++m) {
      std::printf("%-24s %5zu %12.3f %12.3f %12.3f %6d\n", modes[m].name, n, Median(total[m]), Median(inference[m]),
                  Median(overhead[m]), fails[m]);
    }
  }
  return 0;
}
