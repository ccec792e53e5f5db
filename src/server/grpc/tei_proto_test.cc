#include "server/grpc/tei_proto.h"

#include <string>
#include <vector>

#include "common/error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tide::grpc_edge {
namespace {

using ::testing::HasSubstr;

TEST(RerankRequestFromProto, FieldsAndDirection) {
  tei::v1::RerankRequest p;
  p.set_query("q");
  p.add_texts("a");
  p.add_texts("b");
  p.set_truncate(true);
  p.set_return_text(true);
  auto r = RerankRequestFromProto(p, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->texts, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r->truncate);
  EXPECT_FALSE(r->truncation_direction.has_value());  // RIGHT (0): the model's direction
  p.set_truncation_direction(tei::v1::TRUNCATION_DIRECTION_LEFT);
  r = RerankRequestFromProto(p, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->truncation_direction, tokenizer::TruncationDirection::kLeft);
}

TEST(RerankRequestFromProto, Refusals) {
  api::RequestLimits limits;
  limits.max_documents = 2;
  limits.max_text_chars = 5;
  auto refused = [&](const tei::v1::RerankRequest& p, const char* words) {
    auto r = RerankRequestFromProto(p, limits);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(KindOf(r.status()), ErrorKind::kInvalidInput);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(words));
  };
  tei::v1::RerankRequest p;
  p.add_texts("a");
  refused(p, "'query' must not be empty");
  p.set_query("q");
  p.clear_texts();
  refused(p, "'texts' must not be empty");
  for (int i = 0; i < 3; ++i) p.add_texts("a");
  refused(p, "max_documents=2");
  p.clear_texts();
  p.add_texts("toolongtext");
  refused(p, "max_text_chars=5");
}

TEST(RerankStreamCollector, CollectsTextsWithTheFirstOptions) {
  RerankStreamCollector c({});
  tei::v1::RerankStreamRequest m;
  m.set_query("q");
  m.set_text("a");
  m.set_return_text(true);
  ASSERT_TRUE(c.Add(m).ok());
  m.set_text("b");
  m.set_return_text(false);
  ASSERT_TRUE(c.Add(m).ok());
  m.set_query("other");
  EXPECT_FALSE(c.Add(m).ok());
  auto r = c.Finish();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->texts, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r->return_text);
  EXPECT_FALSE(RerankStreamCollector({}).Finish().ok());
}

// tide's `instruction` extension (field 1000): absent stays unset (the model's default), set is
// passed on, over max_text_chars is refused naming it; a stream takes the first message's.
TEST(RerankRequestFromProto, InstructionExtension) {
  tei::v1::RerankRequest p;
  p.set_query("q");
  p.add_texts("a");
  auto r = RerankRequestFromProto(p, {});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->instruction.has_value());
  p.set_instruction("");
  r = RerankRequestFromProto(p, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->instruction, "");  // given, even empty
  p.set_instruction("judge");
  r = RerankRequestFromProto(p, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->instruction, "judge");
  api::RequestLimits limits;
  limits.max_text_chars = 3;
  r = RerankRequestFromProto(p, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("instruction"));

  RerankStreamCollector c({});
  tei::v1::RerankStreamRequest m;
  m.set_query("q");
  m.set_text("a");
  m.set_instruction("first");
  ASSERT_TRUE(c.Add(m).ok());
  m.set_instruction("second");
  ASSERT_TRUE(c.Add(m).ok());
  auto streamed = c.Finish();
  ASSERT_TRUE(streamed.ok());
  EXPECT_EQ(streamed->instruction, "first");

  tei::v1::PredictPairRequest pair;
  pair.add_inputs("q");
  pair.add_inputs("d");
  pair.set_instruction("judge");
  auto predict = PredictRequestFromProto(pair, {});
  ASSERT_TRUE(predict.ok());
  EXPECT_EQ(predict->instruction, "judge");
}

TEST(RerankResponseToProto, RanksHighestFirstTiesInOrder) {
  api::RerankRequest req;
  req.texts = {"a", "b", "c"};
  req.return_text = true;
  const std::vector<float> scores = {0.2f, 0.9f, 0.2f};
  tei::v1::RerankResponse out;
  ASSERT_TRUE(RerankResponseToProto(req, scores, {}, &out).ok());
  ASSERT_EQ(out.ranks_size(), 3);
  EXPECT_EQ(out.ranks(0).index(), 1u);
  EXPECT_EQ(out.ranks(0).text(), "b");
  EXPECT_EQ(out.ranks(1).index(), 0u);
  EXPECT_EQ(out.ranks(2).index(), 2u);
  EXPECT_FALSE(RerankResponseToProto(req, std::vector<float>{1.0f}, {}, &out).ok());
}

TEST(TokenizeRequestFromProto, RefusesPromptName) {
  tei::v1::EncodeRequest p;
  p.set_inputs("hello");
  p.set_add_special_tokens(true);
  auto r = TokenizeRequestFromProto(p, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->inputs[0].text, "hello");
  p.set_prompt_name("query");
  EXPECT_FALSE(TokenizeRequestFromProto(p, {}).ok());
}

TEST(PredictRequestFromProto, OneInputOrOnePair) {
  api::RequestLimits limits;
  limits.max_text_chars = 5;
  tei::v1::PredictRequest one;
  one.set_inputs("abc");
  one.set_raw_scores(true);
  one.set_truncation_direction(tei::v1::TRUNCATION_DIRECTION_LEFT);
  auto r = PredictRequestFromProto(one, limits);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->inputs.size(), 1u);
  EXPECT_EQ(r->inputs[0].text, "abc");
  EXPECT_FALSE(r->inputs[0].text_pair.has_value());
  EXPECT_TRUE(r->raw_scores);
  EXPECT_EQ(r->truncate, std::optional<bool>(false));  // proto3's default, taken as sent
  EXPECT_EQ(r->truncation_direction, tokenizer::TruncationDirection::kLeft);
  one.set_inputs("abcdef");
  EXPECT_EQ(PredictRequestFromProto(one, limits).status().code(), absl::StatusCode::kFailedPrecondition);

  tei::v1::PredictPairRequest pair;
  pair.add_inputs("q");
  EXPECT_EQ(PredictRequestFromProto(pair, limits).status().code(), absl::StatusCode::kFailedPrecondition);
  pair.add_inputs("d");
  pair.set_truncate(true);
  r = PredictRequestFromProto(pair, limits);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->inputs[0].text, "q");
  EXPECT_EQ(r->inputs[0].text_pair, std::optional<std::string>("d"));
  EXPECT_EQ(r->truncate, std::optional<bool>(true));
  EXPECT_FALSE(r->truncation_direction.has_value());  // RIGHT: the model's direction
  pair.add_inputs("x");
  EXPECT_FALSE(PredictRequestFromProto(pair, limits).ok());
}

TEST(DecodeRequestFromProto, EmptyAndOverTheLimit) {
  api::RequestLimits limits;
  limits.max_batch_tensor_elements = 3;
  tei::v1::DecodeRequest p;
  EXPECT_EQ(KindOf(DecodeRequestFromProto(p, limits).status()), ErrorKind::kEmpty);
  p.add_ids(101);
  p.add_ids(7592);
  p.set_skip_special_tokens(true);
  auto r = DecodeRequestFromProto(p, limits);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->ids.size(), 1u);
  EXPECT_EQ(r->ids[0], (std::vector<int64_t>{101, 7592}));
  EXPECT_TRUE(r->skip_special_tokens);
  p.add_ids(1);
  p.add_ids(2);
  EXPECT_EQ(DecodeRequestFromProto(p, limits).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(InfoToProto, GetInfosAnswerAsTeiV1) {
  api::TeiInfo info;
  info.model_id = "m";
  info.classifier = true;
  info.max_concurrent_requests = 512;
  info.max_input_length = 64;
  info.max_batch_tokens = 16384;
  info.max_client_batch_size = 100;
  info.tokenization_workers = 3;
  info.version = "1.2.3";
  tei::v1::InfoResponse out;
  InfoToProto(info, &out);
  EXPECT_EQ(out.model_id(), "m");
  EXPECT_EQ(out.model_dtype(), "float32");
  EXPECT_EQ(out.model_type(), tei::v1::MODEL_TYPE_CLASSIFIER);
  EXPECT_EQ(out.max_concurrent_requests(), 512u);
  EXPECT_EQ(out.max_input_length(), 64u);
  EXPECT_EQ(out.max_batch_tokens(), 16384u);
  EXPECT_FALSE(out.has_max_batch_requests());
  EXPECT_EQ(out.max_client_batch_size(), 100u);
  EXPECT_EQ(out.tokenization_workers(), 3u);
  EXPECT_EQ(out.version(), "1.2.3");
  info.classifier = false;
  info.max_batch_requests = 8;
  info.max_batch_tokens = int64_t{1} << 40;  // clamped, not wrapped
  InfoToProto(info, &out);
  EXPECT_EQ(out.model_type(), tei::v1::MODEL_TYPE_RERANKER);
  EXPECT_EQ(out.max_batch_requests(), 8u);
  EXPECT_EQ(out.max_batch_tokens(), UINT32_MAX);
  info.embedding_pooling = "mean";
  InfoToProto(info, &out);
  EXPECT_EQ(out.model_type(), tei::v1::MODEL_TYPE_EMBEDDING);
}

TEST(EmbedRequestFromProto, FieldsAsSentAndTheEmptyInput) {
  tei::v1::EmbedRequest proto;
  proto.set_inputs("hello");
  auto plain = EmbedRequestFromProto(proto, {});
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_EQ(plain->inputs.size(), 1u);
  EXPECT_EQ(plain->inputs[0].text, "hello");
  EXPECT_EQ(plain->truncate, false);  // proto3's default, as TEI's gRPC API reads it
  EXPECT_FALSE(plain->normalize.has_value());
  EXPECT_FALSE(plain->dimensions.has_value());
  proto.set_truncate(true);
  proto.set_normalize(false);
  proto.set_prompt_name("query");
  proto.set_dimensions(16);
  proto.set_truncation_direction(tei::v1::TRUNCATION_DIRECTION_LEFT);
  auto all = EmbedRequestFromProto(proto, {});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->truncate, true);
  EXPECT_EQ(all->normalize, false);
  EXPECT_EQ(all->prompt_name, "query");
  EXPECT_EQ(all->dimensions, 16u);
  EXPECT_EQ(all->truncation_direction, tokenizer::TruncationDirection::kLeft);
  proto.set_dimensions(0);
  EXPECT_EQ(KindOf(EmbedRequestFromProto(proto, {}).status()), ErrorKind::kInvalidInput);
  tei::v1::EmbedRequest empty;
  EXPECT_EQ(KindOf(EmbedRequestFromProto(empty, {}).status()), ErrorKind::kEmpty);
  api::RequestLimits limits;
  limits.max_text_chars = 3;
  EXPECT_FALSE(EmbedRequestFromProto(proto, limits).ok());
}

TEST(EmbedAllRequestFromProto, FieldsAsSentAndTheEmptyInput) {
  tei::v1::EmbedAllRequest proto;
  proto.set_inputs("hello");
  auto plain = EmbedAllRequestFromProto(proto, {});
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_EQ(plain->inputs.size(), 1u);
  EXPECT_EQ(plain->inputs[0].text, "hello");
  EXPECT_EQ(plain->truncate, false);  // proto3's default, as TEI's gRPC API reads it
  EXPECT_FALSE(plain->prompt_name.has_value());
  proto.set_truncate(true);
  proto.set_prompt_name("query");
  proto.set_truncation_direction(tei::v1::TRUNCATION_DIRECTION_LEFT);
  auto all = EmbedAllRequestFromProto(proto, {});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->truncate, true);
  EXPECT_EQ(all->prompt_name, "query");
  EXPECT_EQ(all->truncation_direction, tokenizer::TruncationDirection::kLeft);
  EXPECT_FALSE(all->normalize.has_value());  // token states are raw
  EXPECT_FALSE(all->dimensions.has_value());
  EXPECT_EQ(KindOf(EmbedAllRequestFromProto(tei::v1::EmbedAllRequest(), {}).status()), ErrorKind::kEmpty);
  api::RequestLimits limits;
  limits.max_text_chars = 3;
  EXPECT_FALSE(EmbedAllRequestFromProto(proto, limits).ok());
}

TEST(TokensToProto, OffsetsOnlyWhereKnown) {
  std::vector<api::TokenInfo> tokens(2);
  tokens[0].id = 101;
  tokens[0].text = "[CLS]";
  tokens[0].special = true;
  tokens[1].id = 7592;
  tokens[1].text = "hello";
  tokens[1].start = 0;
  tokens[1].stop = 5;
  tei::v1::EncodeResponse out;
  TokensToProto(tokens, &out);
  ASSERT_EQ(out.tokens_size(), 2);
  EXPECT_EQ(out.tokens(0).id(), 101u);
  EXPECT_TRUE(out.tokens(0).special());
  EXPECT_FALSE(out.tokens(0).has_start());
  EXPECT_FALSE(out.tokens(0).has_stop());
  EXPECT_EQ(out.tokens(1).text(), "hello");
  EXPECT_FALSE(out.tokens(1).special());
  EXPECT_EQ(out.tokens(1).start(), 0u);
  EXPECT_EQ(out.tokens(1).stop(), 5u);
}

}  // namespace
}  // namespace tide::grpc_edge
