// libFuzzer target for every request parser in src/api. The first input byte selects the parser;
// the rest is the request body. Successful parses are rendered too (with synthetic scores and
// tokens), and binary infer requests are echoed back through the response renderer and parsed
// again, so the renderers see whatever the parsers let through. Checks: no crash, no sanitizer
// report, parse(render(x)) agreement for the binary round trip.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api/cohere_rerank.h"
#include "api/embed.h"
#include "api/json_reader.h"
#include "api/kserve_infer.h"
#include "api/rerank.h"
#include "api/tei_decode.h"
#include "api/tei_predict.h"
#include "api/status_http.h"
#include "common/error.h"
#include "server/http/error_response.h"
#include "api/tokenize.h"

namespace {

using namespace tide::api;

std::vector<float> FakeScores(size_t n) {
  std::vector<float> scores(n);
  for (size_t i = 0; i < n; ++i) scores[i] = static_cast<float>((i * 7919) % 13) - 6.0f;
  return scores;
}

void Check(bool condition) {
  if (!condition) std::abort();
}

// Every error carries an error kind (no status without one reaches an edge) and renders, through
// the server's own HTTP rendering, to an error status and a body.
void CheckError(const absl::Status& status) {
  Check(!status.ok());
  Check(tide::FindKind(status).has_value());
  const tide::http::Response response = tide::http::ErrorResponse(status);
  Check(response.status >= 400 && response.status < 600);
  Check(response.status == HttpStatusFor(status));
  Check(!response.body.empty());
}

// An embed request of any of the three APIs: a parse that succeeds renders with synthetic vectors
// of a small dimension (cut by the request's dimensions, as the server would), every quantized
// type included; the renderers must accept what the parsers let through.
void FuzzEmbed(EmbedApi api, std::string_view body, const RequestLimits& limits) {
  absl::StatusOr<EmbedRequest> r = api == EmbedApi::kTei      ? ParseTeiEmbedRequest(body, limits)
                                   : api == EmbedApi::kOpenAi ? ParseOpenAiEmbeddingsRequest(body, limits)
                                                              : ParseCohereEmbedRequest(body, limits);
  if (!r.ok()) {
    CheckError(r.status());
    const ApiError openai = OpenAiError(r.status());
    const ApiError cohere = CohereError(r.status());
    Check(openai.http_status >= 400 && !openai.body.empty());
    Check(cohere.http_status >= 400 && !cohere.body.empty());
    return;
  }
  Check(!r->inputs.empty());
  Check(!r->dimensions.has_value() || *r->dimensions >= 1);
  constexpr size_t kDim = 12;
  const size_t dim = std::min(r->dimensions.value_or(kDim), kDim);
  const std::vector<float> full = FakeScores(r->inputs.size() * kDim);
  const std::vector<float> vectors = CutAndNormalize(full, r->inputs.size(), kDim, dim, r->normalize.value_or(true));
  Check(vectors.size() == r->inputs.size() * dim);
  for (size_t i = 0; i < r->inputs.size(); ++i) {
    for (EmbeddingType type : r->embedding_types) {
      const std::vector<int32_t> q = Quantize(std::span<const float>(vectors).subspan(i * dim, dim), type);
      Check(type == EmbeddingType::kFloat || !q.empty());
    }
  }
  switch (api) {
    case EmbedApi::kTei:
      Check(RenderTeiEmbedResponse(r->inputs.size(), vectors, dim).ok());
      break;
    case EmbedApi::kOpenAi:
      Check(RenderOpenAiEmbeddingsResponse(*r, "m", vectors, dim, 1).ok());
      break;
    case EmbedApi::kCohere:
      Check(RenderCohereEmbedResponse(*r, "id", vectors, dim, 1).ok());
      break;
  }
}

void FuzzInfer(std::string_view body, std::optional<std::string_view> header,
               const RequestLimits& limits) {
  absl::StatusOr<InferRequest> request = ParseInferRequest(body, header, limits);
  if (!request.ok()) {
    CheckError(request.status());
    return;
  }
  // Echo the inputs back as binary outputs and parse the result as a request again.
  InferResponse response;
  response.id = request->id;
  response.outputs = request->inputs;
  for (Tensor& t : response.outputs) t.parameters.clear();
  InferRequest binary_request;
  binary_request.binary_data_output = true;
  absl::StatusOr<RenderedInferResponse> rendered = RenderInferResponse(response, binary_request);
  Check(rendered.ok());
  Check(rendered->inference_header_content_length.has_value());
  std::string echoed = rendered->body;
  const std::string marker = "\"outputs\":";
  const size_t at = echoed.find(marker);
  Check(at != std::string::npos);
  // Rename the top-level "outputs" key to "inputs" (same length as written, so adjust header).
  echoed.replace(at, marker.size(), "\"inputs\": ");
  absl::StatusOr<InferRequest> again = ParseInferRequest(
      echoed, std::to_string(*rendered->inference_header_content_length), limits);
  Check(again.ok());
  Check(again->inputs.size() == request->inputs.size());
  for (size_t i = 0; i < again->inputs.size(); ++i) {
    Check(again->inputs[i].name == request->inputs[i].name);
    Check(again->inputs[i].shape == request->inputs[i].shape);
    Check(TensorDataSize(again->inputs[i].data) == TensorDataSize(request->inputs[i].data));
  }
  (void)RenderInferResponse(response, *request);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  RequestLimits limits;
  limits.max_batch_tensor_elements = 1 << 16;  // keep allocations small under ASan
  switch (selector % 11) {  // 0..7 as before (the corpus's selectors keep their meaning)
    case 0: {
      absl::StatusOr<RerankRequest> r = ParseRerankRequest(body, limits);
      if (!r.ok()) {
        CheckError(r.status());
        break;
      }
      Check(!r->texts.empty() && !r->query.empty());
      Check(RenderRerankResponse(*r, FakeScores(r->texts.size())).ok());
      break;
    }
    case 1: {
      absl::StatusOr<CohereRerankRequest> r = ParseCohereRerankRequest(body, limits);
      if (!r.ok()) {
        CheckError(r.status());
        break;
      }
      Check(RenderCohereRerankResponse(*r, FakeScores(r->documents.size()), {"id", "m", 1}).ok());
      break;
    }
    case 2: {
      absl::StatusOr<TokenizeRequest> r = ParseTokenizeRequest(body, limits);
      if (!r.ok()) {
        CheckError(r.status());
        break;
      }
      std::vector<std::vector<TokenInfo>> tokens;
      for (const TokenizeInput& input : r->inputs) {
        // Byte-sized "tokens", deliberately splitting UTF-8 sequences.
        std::vector<TokenInfo> list;
        for (size_t i = 0; i < input.text.size() && i < 64; ++i) {
          list.push_back({static_cast<int64_t>(i), input.text.substr(i, 1), i == 0, i, i + 1});
        }
        tokens.push_back(std::move(list));
      }
      Check(!RenderTokenizeResponse(tokens).empty());
      break;
    }
    case 3:
      FuzzInfer(body, std::nullopt, limits);
      break;
    case 4: {
      // Next two bytes: the Inference-Header-Content-Length value.
      if (body.size() < 2) break;
      const size_t length = static_cast<uint8_t>(body[0]) | (static_cast<uint8_t>(body[1]) << 8);
      body.remove_prefix(2);
      FuzzInfer(body, std::to_string(length), limits);
      break;
    }
    case 5:
      // Raw header text and depth scan on arbitrary bytes.
      (void)CheckJsonDepth(body, 8);
      FuzzInfer(body, body.substr(0, 4), limits);
      break;
    case 6: {
      absl::StatusOr<PredictRequest> r = ParsePredictRequest(body, limits);
      if (!r.ok()) {
        CheckError(r.status());
        break;
      }
      Check(!r->inputs.empty());
      const std::vector<std::string> labels = {"LABEL_0", "LABEL_1"};
      Check(RenderPredictResponse(*r, std::vector<float>(r->inputs.size() * 2, 0.5f), labels).ok());
      break;
    }
    case 7: {
      absl::StatusOr<DecodeRequest> r = ParseDecodeRequest(body, limits);
      if (!r.ok()) {
        CheckError(r.status());
        break;
      }
      Check(!r->ids.empty());
      for (const auto& ids : r->ids) Check(!ids.empty());
      break;
    }
    case 8:
      FuzzEmbed(EmbedApi::kTei, body, limits);
      break;
    case 9:
      FuzzEmbed(EmbedApi::kOpenAi, body, limits);
      break;
    case 10:
      FuzzEmbed(EmbedApi::kCohere, body, limits);
      break;
  }
  return 0;
}
