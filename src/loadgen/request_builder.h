// tide::loadgen::RequestBuilder — turns a RerankWorkload into the HTTP body of one endpoint.
//
// Endpoints (default path, body):
//   rerank     POST /rerank                     TEI: {"query", "texts": [...]}
//   v1-rerank  POST /v1/rerank                  Cohere: {"model"?, "query", "documents": [...]}
//   kserve     POST /v2/models/{model}/infer    KServe v2: BYTES inputs "text" (the query, once
//                                               per document) and "text_pair" (the documents)
//   embed      POST /embed                      TEI embeddings: {"inputs": [...]} (the documents)
//   v1-embeddings POST /v1/embeddings           OpenAI: {"model"?, "input": [...]} (the documents)
//   template   POST <path of --url>             the body template with placeholders replaced
// The embedding endpoints send a request's documents as the texts to embed (its query is not
// sent): --documents N is the batch of texts per request, --doc-tokens their lengths.
// A body template may be given for any endpoint (it replaces the built-in body). Placeholders:
//   {{query}}          the query, JSON-escaped, without quotes
//   {{query_json}}     the query as a JSON string literal
//   {{documents_json}} the documents as a JSON array of strings
//   {{model}}          the model name, JSON-escaped, without quotes
//   {{n_documents}}    the number of documents
// Contract: Create fails with kInvalidArgument for an unknown endpoint, a kserve endpoint without
// a model, or a template endpoint without a template or path. Body() is const and thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "loadgen/workload.h"

namespace tide::loadgen {

enum class Endpoint { kRerank, kCohereRerank, kKServe, kEmbed, kOpenAIEmbeddings, kTemplate };

absl::StatusOr<Endpoint> ParseEndpoint(std::string_view name);
std::string_view EndpointName(Endpoint endpoint);
// True for the embedding endpoints: a request's items are texts to embed, not (query, document) pairs.
bool IsEmbedding(Endpoint endpoint);

struct RequestBuilderOptions {
  Endpoint endpoint = Endpoint::kRerank;
  std::string model;                   // KServe model name; echoed to Cohere's and OpenAI's "model" if set
  std::optional<std::string> body_template;  // template text (not the file name)
  std::string path;                    // overrides the endpoint's default path when non-empty
};

class RequestBuilder {
 public:
  static absl::StatusOr<std::unique_ptr<RequestBuilder>> Create(const RequestBuilderOptions& options);
  const std::string& path() const { return path_; }
  std::string Body(const RerankWorkload& workload) const;

 private:
  explicit RequestBuilder(RequestBuilderOptions options) : options_(std::move(options)) {}
  RequestBuilderOptions options_;
  std::string path_;
};

}  // namespace tide::loadgen
