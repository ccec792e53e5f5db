#include "loadgen/request_builder.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tide::loadgen {
namespace {

using json = nlohmann::json;

RerankWorkload Sample() {
  RerankWorkload w;
  w.query = "what is \"panda\"?";
  w.documents = {"the giant panda", "a bear\nspecies"};
  return w;
}

std::unique_ptr<RequestBuilder> Make(RequestBuilderOptions o) {
  auto b = RequestBuilder::Create(o);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *std::move(b) : nullptr;
}

TEST(RequestBuilder, TeiRerankBody) {
  auto b = Make({});
  EXPECT_EQ(b->path(), "/rerank");
  json body = json::parse(b->Body(Sample()));
  EXPECT_EQ(body["query"], "what is \"panda\"?");
  EXPECT_EQ(body["texts"], json({"the giant panda", "a bear\nspecies"}));
}

TEST(RequestBuilder, CohereBodyCarriesTheModel) {
  RequestBuilderOptions o;
  o.endpoint = Endpoint::kCohereRerank;
  o.model = "distil";
  auto b = Make(o);
  EXPECT_EQ(b->path(), "/v1/rerank");
  json body = json::parse(b->Body(Sample()));
  EXPECT_EQ(body["model"], "distil");
  EXPECT_EQ(body["documents"].size(), 2u);
}

TEST(RequestBuilder, KServeBodyPairsTheQueryWithEveryDocument) {
  RequestBuilderOptions o;
  o.endpoint = Endpoint::kKServe;
  EXPECT_FALSE(RequestBuilder::Create(o).ok());  // needs a model
  o.model = "distil";
  auto b = Make(o);
  EXPECT_EQ(b->path(), "/v2/models/distil/infer");
  json body = json::parse(b->Body(Sample()));
  ASSERT_EQ(body["inputs"].size(), 2u);
  EXPECT_EQ(body["inputs"][0]["name"], "text");
  EXPECT_EQ(body["inputs"][0]["datatype"], "BYTES");
  EXPECT_EQ(body["inputs"][0]["shape"], json({2}));
  EXPECT_EQ(body["inputs"][0]["data"], json({"what is \"panda\"?", "what is \"panda\"?"}));
  EXPECT_EQ(body["inputs"][1]["name"], "text_pair");
  EXPECT_EQ(body["inputs"][1]["data"], json({"the giant panda", "a bear\nspecies"}));
}

TEST(RequestBuilder, TemplateReplacesEveryPlaceholderWithEscapedText) {
  RequestBuilderOptions o;
  o.endpoint = Endpoint::kTemplate;
  EXPECT_FALSE(RequestBuilder::Create(o).ok());  // needs a template
  o.body_template = R"({"q": "{{query}}", "q2": {{query_json}}, "docs": {{documents_json}}, )"
                    R"("m": "{{model}}", "n": {{n_documents}}})";
  EXPECT_FALSE(RequestBuilder::Create(o).ok());  // needs a path
  o.path = "/custom";
  o.model = "m\"1";
  auto b = Make(o);
  EXPECT_EQ(b->path(), "/custom");
  json body = json::parse(b->Body(Sample()));
  EXPECT_EQ(body["q"], "what is \"panda\"?");
  EXPECT_EQ(body["q2"], "what is \"panda\"?");
  EXPECT_EQ(body["docs"], json({"the giant panda", "a bear\nspecies"}));
  EXPECT_EQ(body["m"], "m\"1");
  EXPECT_EQ(body["n"], 2);
}

// The embedding endpoints send the documents as the batch of texts; the query is not sent.
TEST(RequestBuilder, EmbeddingBodiesSendTheTexts) {
  RequestBuilderOptions o;
  o.endpoint = Endpoint::kEmbed;
  auto tei = Make(o);
  EXPECT_EQ(tei->path(), "/embed");
  EXPECT_EQ(json::parse(tei->Body(Sample())), json({{"inputs", {"the giant panda", "a bear\nspecies"}}}));

  o.endpoint = Endpoint::kOpenAIEmbeddings;
  auto openai = Make(o);
  EXPECT_EQ(openai->path(), "/v1/embeddings");
  EXPECT_EQ(json::parse(openai->Body(Sample())), json({{"input", {"the giant panda", "a bear\nspecies"}}}));
  o.model = "minilm";
  EXPECT_EQ(json::parse(Make(o)->Body(Sample()))["model"], "minilm");
}

TEST(RequestBuilder, PathOverrideAndEndpointNames) {
  RequestBuilderOptions o;
  o.path = "/proxy/rerank";
  EXPECT_EQ(Make(o)->path(), "/proxy/rerank");
  for (Endpoint e : {Endpoint::kRerank, Endpoint::kCohereRerank, Endpoint::kKServe, Endpoint::kEmbed,
                     Endpoint::kOpenAIEmbeddings, Endpoint::kTemplate})
    EXPECT_EQ(*ParseEndpoint(EndpointName(e)), e);
  EXPECT_TRUE(IsEmbedding(Endpoint::kEmbed));
  EXPECT_TRUE(IsEmbedding(Endpoint::kOpenAIEmbeddings));
  EXPECT_FALSE(IsEmbedding(Endpoint::kRerank));
  EXPECT_FALSE(ParseEndpoint("grpc").ok());
}

}  // namespace
}  // namespace tide::loadgen
