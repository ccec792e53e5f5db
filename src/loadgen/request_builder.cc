#include "loadgen/request_builder.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"

namespace tide::loadgen {
namespace {

using json = nlohmann::json;

std::string JsonString(std::string_view s) {
  return json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}
std::string JsonEscaped(std::string_view s) {
  std::string quoted = JsonString(s);
  return quoted.substr(1, quoted.size() - 2);
}

}  // namespace

absl::StatusOr<Endpoint> ParseEndpoint(std::string_view name) {
  if (name == "rerank") return Endpoint::kRerank;
  if (name == "v1-rerank") return Endpoint::kCohereRerank;
  if (name == "kserve") return Endpoint::kKServe;
  if (name == "embed") return Endpoint::kEmbed;
  if (name == "v1-embeddings") return Endpoint::kOpenAIEmbeddings;
  if (name == "template") return Endpoint::kTemplate;
  return absl::InvalidArgumentError(absl::StrCat("unknown endpoint '", std::string(name),
                                                 "' (rerank, v1-rerank, kserve, embed, v1-embeddings, template)"));
}

std::string_view EndpointName(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::kRerank: return "rerank";
    case Endpoint::kCohereRerank: return "v1-rerank";
    case Endpoint::kKServe: return "kserve";
    case Endpoint::kEmbed: return "embed";
    case Endpoint::kOpenAIEmbeddings: return "v1-embeddings";
    case Endpoint::kTemplate: return "template";
  }
  return "?";
}

bool IsEmbedding(Endpoint endpoint) { return endpoint == Endpoint::kEmbed || endpoint == Endpoint::kOpenAIEmbeddings; }

absl::StatusOr<std::unique_ptr<RequestBuilder>> RequestBuilder::Create(
    const RequestBuilderOptions& options) {
  std::unique_ptr<RequestBuilder> b(new RequestBuilder(options));
  switch (options.endpoint) {
    case Endpoint::kRerank: b->path_ = "/rerank"; break;
    case Endpoint::kCohereRerank: b->path_ = "/v1/rerank"; break;
    case Endpoint::kKServe:
      if (options.model.empty())
        return absl::InvalidArgumentError("the kserve endpoint needs a model name (--model)");
      b->path_ = absl::StrCat("/v2/models/", options.model, "/infer");
      break;
    case Endpoint::kEmbed: b->path_ = "/embed"; break;
    case Endpoint::kOpenAIEmbeddings: b->path_ = "/v1/embeddings"; break;
    case Endpoint::kTemplate:
      if (!options.body_template)
        return absl::InvalidArgumentError("the template endpoint needs a body template");
      if (options.path.empty())
        return absl::InvalidArgumentError("the template endpoint needs a path in the URL");
      break;
  }
  if (!options.path.empty()) b->path_ = options.path;
  return b;
}

std::string RequestBuilder::Body(const RerankWorkload& w) const {
  if (options_.body_template) {
    std::string documents_json = json(w.documents).dump(-1, ' ', false, json::error_handler_t::replace);
    return absl::StrReplaceAll(*options_.body_template,
                               {{"{{query}}", JsonEscaped(w.query)},
                                {"{{query_json}}", JsonString(w.query)},
                                {"{{documents_json}}", documents_json},
                                {"{{model}}", JsonEscaped(options_.model)},
                                {"{{n_documents}}", absl::StrCat(w.documents.size())}});
  }
  json body;
  switch (options_.endpoint) {
    case Endpoint::kRerank:
      body = {{"query", w.query}, {"texts", w.documents}};
      break;
    case Endpoint::kCohereRerank:
      if (!options_.model.empty()) body["model"] = options_.model;
      body["query"] = w.query;
      body["documents"] = w.documents;
      break;
    case Endpoint::kKServe: {
      const int64_t n = static_cast<int64_t>(w.documents.size());
      json queries = json::array();
      for (int64_t i = 0; i < n; ++i) queries.push_back(w.query);
      body["inputs"] = json::array(
          {{{"name", "text"}, {"shape", {n}}, {"datatype", "BYTES"}, {"data", std::move(queries)}},
           {{"name", "text_pair"}, {"shape", {n}}, {"datatype", "BYTES"}, {"data", w.documents}}});
      break;
    }
    case Endpoint::kEmbed:
      body["inputs"] = w.documents;
      break;
    case Endpoint::kOpenAIEmbeddings:
      if (!options_.model.empty()) body["model"] = options_.model;
      body["input"] = w.documents;
      break;
    case Endpoint::kTemplate:
      break;  // Create() guarantees a template
  }
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace tide::loadgen
