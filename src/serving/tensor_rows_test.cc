// Unit tests of the KServe tensor -> row conversion and the token input limits it checks against
// (a value the engine rejects must be refused before its row joins a batch).
#include "serving/tensor_rows.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tokenizer/testing/small_bert_tokenizer.h"
#include "nlohmann/json.hpp"
#include "serving/token_input_limits.h"
#include "onnx/onnx_pb.h"

namespace tide::serving {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

// A small BERT-like tokenizer (pairs get token types 0 and 1).
std::unique_ptr<tokenizer::Tokenizer> SmallBert() { return tokenizer::testing::SmallBertTokenizer({"a", "b"}); }

api::Tensor Int64Tensor(const std::string& name, std::vector<int64_t> shape, std::vector<int64_t> data) {
  api::Tensor t;
  t.name = name;
  t.datatype = api::DataType::kInt64;
  t.shape = std::move(shape);
  t.data = std::move(data);
  return t;
}

class TensorRowsTest : public ::testing::Test {
 protected:
  TensorRowsTest() {
    signature_.token_type_ids_name = "token_type_ids";
    model_.name = "m";
    model_.signature = &signature_;
    model_.limits = {.vocab_size = 100, .type_vocab_size = 2};
    model_.max_sequence_length = 8;
  }
  // [2, 4] ids, mask, types with `types` and `mask` as given.
  absl::Status Convert(std::vector<int64_t> types, std::vector<int64_t> mask = {1, 1, 1, 1, 1, 1, 1, 0},
                       std::vector<int64_t> ids = {2, 4, 3, 5, 2, 5, 3, 0}) {
    api::InferRequest request;
    request.inputs.push_back(Int64Tensor("input_ids", {2, 4}, std::move(ids)));
    request.inputs.push_back(Int64Tensor("attention_mask", {2, 4}, std::move(mask)));
    if (!types.empty()) request.inputs.push_back(Int64Tensor("token_type_ids", {2, 4}, std::move(types)));
    Clock::duration tokenize{};
    return RowsFromTensors(model_, request, &rows_, &tokenize);
  }

  ModelSignature signature_;
  TensorRowsModel model_;
  std::vector<tokenizer::Encoding> rows_;
};

TEST_F(TensorRowsTest, ValidTensorsBecomeRows) {
  ASSERT_TRUE(Convert({0, 0, 1, 1, 0, 1, 1, 0}).ok());
  ASSERT_EQ(rows_.size(), 2u);
  EXPECT_EQ(rows_[0].ids, (std::vector<int64_t>{2, 4, 3, 5}));
  EXPECT_EQ(rows_[0].type_ids, (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(rows_[1].attention_mask, (std::vector<int64_t>{1, 1, 1, 0}));
  EXPECT_EQ(rows_[1].untruncated_length, 4u);
  ASSERT_TRUE(Convert({}).ok());  // no token_type_ids: zeros
  EXPECT_EQ(rows_[1].type_ids, (std::vector<int64_t>{0, 0, 0, 0}));
}

TEST_F(TensorRowsTest, TokenTypeIdsOutsideTheModelsTypesAre422NamingFieldAndPosition) {
  absl::Status s = Convert({0, 0, 2, 2, 0, 0, 0, 0});  // the request that once failed a whole batch
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("token_type_ids[0][2] = 2"));
  EXPECT_THAT(s.message(), HasSubstr("0..1"));
  s = Convert({0, 0, 0, 0, 0, -1, 0, 0});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("token_type_ids[1][1] = -1"));
}

TEST_F(TensorRowsTest, AttentionMaskMustBeZeroOrOneAndAttendToSomething) {
  absl::Status s = Convert({}, {1, 1, 2, 1, 1, 1, 1, 1});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("attention_mask[0][2] = 2"));
  s = Convert({}, {1, 1, 1, 1, 1, -1, 1, 1});
  EXPECT_THAT(s.message(), HasSubstr("attention_mask[1][1] = -1"));
  s = Convert({}, {1, 1, 1, 1, 0, 0, 0, 0});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("attention_mask[1] attends to no token"));
}

TEST_F(TensorRowsTest, InputIdsOutsideTheVocabularyAre422) {
  absl::Status s = Convert({}, {1, 1, 1, 1, 1, 1, 1, 1}, {2, 4, 3, 5, 2, 100, 3, 0});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("input_ids[1][1] = 100 is outside the vocabulary (0..99)"));
  s = Convert({}, {1, 1, 1, 1, 1, 1, 1, 1}, {2, -4, 3, 5, 2, 5, 3, 0});
  EXPECT_THAT(s.message(), HasSubstr("input_ids[0][1] = -4"));
}

TEST_F(TensorRowsTest, ShapesCountsAndNamesAreChecked) {
  api::InferRequest request;
  request.inputs.push_back(Int64Tensor("input_ids", {2, 4}, {2, 4, 3}));  // 3 elements for 8
  Clock::duration tokenize{};
  absl::Status s = RowsFromTensors(model_, request, &rows_, &tokenize);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("elements"));
  request.inputs[0] = Int64Tensor("input_ids", {1, 9}, std::vector<int64_t>(9, 2));
  EXPECT_THAT(RowsFromTensors(model_, request, &rows_, &tokenize).message(), HasSubstr("max_sequence_length"));
  request.inputs[0] = Int64Tensor("input_ids", {1, 2}, {2, 3});
  request.inputs.push_back(Int64Tensor("input_ids", {1, 2}, {2, 3}));
  EXPECT_THAT(RowsFromTensors(model_, request, &rows_, &tokenize).message(), HasSubstr("given twice"));
  request.inputs[1] = Int64Tensor("segment_ids", {1, 2}, {0, 0});
  EXPECT_THAT(RowsFromTensors(model_, request, &rows_, &tokenize).message(), HasSubstr("segment_ids"));
  api::InferRequest int32;
  api::Tensor t;
  t.name = "input_ids";
  t.datatype = api::DataType::kInt32;
  t.shape = {1, 2};
  t.data = std::vector<int32_t>{2, 300};
  int32.inputs.push_back(t);
  EXPECT_THAT(RowsFromTensors(model_, int32, &rows_, &tokenize).message(), HasSubstr("input_ids[0][1] = 300"));
}

TEST_F(TensorRowsTest, TextIsEncodedByTheTokenizer) {
  auto tok = SmallBert();
  ASSERT_NE(tok, nullptr);
  model_.tokenizer = tok.get();
  api::InferRequest request;
  api::Tensor text;
  text.name = "text";
  text.datatype = api::DataType::kBytes;
  text.shape = {1};
  text.data = std::vector<std::string>{"a"};
  api::Tensor pair = text;
  pair.name = "text_pair";
  pair.data = std::vector<std::string>{"b"};
  request.inputs = {text, pair};
  Clock::duration tokenize{};
  ASSERT_TRUE(RowsFromTensors(model_, request, &rows_, &tokenize).ok());
  ASSERT_EQ(rows_.size(), 1u);
  EXPECT_EQ(rows_[0].ids, (std::vector<int64_t>{2, 4, 3, 5, 3}));
  EXPECT_EQ(rows_[0].type_ids, (std::vector<int64_t>{0, 0, 0, 1, 1}));
}

// ---- ResolveTokenInputLimits ----------------------------------------------------------------------

TEST(TokenInputLimitsTest, FromTheGraphTheParameterOrTheTokenizer) {
  auto tok = SmallBert();
  ASSERT_NE(tok, nullptr);
  ModelSignature sig;
  sig.token_type_ids_name = "token_type_ids";
  GraphEmbeddingRows graph{.input_ids = 1000, .token_type_ids = 3};
  auto r = ResolveTokenInputLimits(sig, *tok, graph, std::nullopt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->limits.type_vocab_size, 3);
  EXPECT_EQ(r->limits.vocab_size, 6);  // the tokenizer's, smaller than the table
  EXPECT_FALSE(r->log_is_warning);
  EXPECT_THAT(r->log, HasSubstr("graph"));
  // A parameter narrows, or widens with a warning.
  r = ResolveTokenInputLimits(sig, *tok, graph, 1);
  EXPECT_EQ(r->limits.type_vocab_size, 1);
  EXPECT_FALSE(r->log_is_warning);
  r = ResolveTokenInputLimits(sig, *tok, graph, 5);
  EXPECT_EQ(r->limits.type_vocab_size, 5);
  EXPECT_TRUE(r->log_is_warning);
  EXPECT_THAT(r->log, HasSubstr("above the graph's 3"));
  // Not derivable: what the tokenizer produces for a pair (0 and 1), with a warning.
  r = ResolveTokenInputLimits(sig, *tok, absl::UnimplementedError("no onnx"), std::nullopt);
  EXPECT_EQ(r->limits.type_vocab_size, 2);
  EXPECT_TRUE(r->log_is_warning);
  EXPECT_THAT(r->log, HasSubstr("no onnx"));
  r = ResolveTokenInputLimits(sig, *tok, GraphEmbeddingRows{}, std::nullopt);
  EXPECT_EQ(r->limits.type_vocab_size, 2);
  // A graph table smaller than the tokenizer bounds input_ids.
  r = ResolveTokenInputLimits(sig, *tok, GraphEmbeddingRows{.input_ids = 4, .token_type_ids = 2}, std::nullopt);
  EXPECT_EQ(r->limits.vocab_size, 4);
  EXPECT_TRUE(r->log_is_warning);
  // A graph with one token type and a tokenizer that gives pairs type 1: reported.
  r = ResolveTokenInputLimits(sig, *tok, GraphEmbeddingRows{.input_ids = 6, .token_type_ids = 1}, std::nullopt);
  EXPECT_EQ(r->limits.type_vocab_size, 1);
  EXPECT_TRUE(r->log_is_warning);
  EXPECT_THAT(r->log, HasSubstr("text pairs will fail"));
  // A model without token_type_ids: 0 only; the parameter is a configuration error.
  sig.token_type_ids_name.clear();
  r = ResolveTokenInputLimits(sig, *tok, graph, std::nullopt);
  EXPECT_EQ(r->limits.type_vocab_size, 1);
  EXPECT_EQ(ResolveTokenInputLimits(sig, *tok, graph, 2).status().code(), absl::StatusCode::kFailedPrecondition);
}

// BERT-like embeddings: Gather(word[50 x 4], input_ids) + Gather(type[3 x 4], Cast(token_type_ids)).
TEST(TokenInputLimitsTest, ReadEmbeddingRowsFindsTheGathersTables) {
  onnx::ModelProto model;
  model.set_ir_version(7);
  model.add_opset_import()->set_version(11);
  onnx::GraphProto* g = model.mutable_graph();
  for (const char* name : {"input_ids", "attention_mask", "token_type_ids"}) g->add_input()->set_name(name);
  auto table = [&](const std::string& name, int64_t rows) {
    onnx::TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(rows);
    t->add_dims(4);
  };
  table("word", 50);
  table("type", 3);
  auto node = [&](const std::string& op, std::vector<std::string> in, const std::string& out) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    for (auto& i : in) n->add_input(i);
    n->add_output(out);
  };
  node("Gather", {"word", "input_ids"}, "w");
  node("Cast", {"token_type_ids"}, "types32");
  node("Gather", {"type", "types32"}, "t");
  node("Add", {"w", "t"}, "e");
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / "tide_token_input_limits_test.onnx";
  {
    std::ofstream out(path, std::ios::binary);
    out << model.SerializeAsString();
  }
  ModelSignature sig;
  sig.token_type_ids_name = "token_type_ids";
  auto rows = ReadEmbeddingRows(path.string(), sig);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->input_ids, 50);
  EXPECT_EQ(rows->token_type_ids, 3);
  sig.attention_mask_name = "attention_mask";
  sig.input_ids_name = "attention_mask";  // feeds no Gather
  rows = ReadEmbeddingRows(path.string(), sig);
  EXPECT_FALSE(rows->input_ids.has_value());
  EXPECT_EQ(ReadEmbeddingRows("no/such/model.onnx", sig).status().code(), absl::StatusCode::kNotFound);
  std::filesystem::remove(path);
}

// Long documents on KServe text tensors: window rows fold back per input and per label.
TEST(FoldWindowRows, MaxOrMeanPerLabelOverEachInputsWindows) {
  InferenceResult r;
  r.num_labels = 2;
  r.rows = 4;  // input 0: one window; input 1: three windows
  r.logits = {1, -1, /**/ 0.5f, 2, /**/ 3, 0, /**/ -0.5f, 1};
  r.real_tokens = 40;
  TensorWindows w;
  w.owner = {0, 1, 1, 1};
  w.inputs = 2;
  w.mode = LongDocuments::kChunkMax;
  InferenceResult max = r;
  FoldWindowRows(w, &max);
  EXPECT_EQ(max.rows, 2);
  EXPECT_EQ(max.logits, (std::vector<float>{1, -1, 3, 2}));
  EXPECT_EQ(max.real_tokens, 40u);  // every window's tokens still count
  w.mode = LongDocuments::kChunkMean;
  InferenceResult mean = r;
  FoldWindowRows(w, &mean);
  EXPECT_EQ(mean.rows, 2);
  EXPECT_EQ(mean.logits, (std::vector<float>{1, -1, 1, 1}));
  // Nothing split: untouched.
  InferenceResult same = r;
  FoldWindowRows(TensorWindows{}, &same);
  EXPECT_EQ(same.logits, r.logits);
  EXPECT_EQ(same.rows, 4);
}

TEST(LongDocumentsParameter, AbsentNamedOrRefused) {
  api::Parameters p;
  auto none = LongDocumentsParameter(p);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  p["long_documents"] = std::string("chunk_mean");
  auto mean = LongDocumentsParameter(p);
  ASSERT_TRUE(mean.ok());
  EXPECT_EQ(*mean, LongDocuments::kChunkMean);
  p["long_documents"] = std::string("chunk_median");
  EXPECT_EQ(LongDocumentsParameter(p).status().code(), absl::StatusCode::kFailedPrecondition);
  p["long_documents"] = int64_t{1};
  EXPECT_THAT(LongDocumentsParameter(p).status().message(), HasSubstr("long_documents"));
}

}  // namespace
}  // namespace tide::serving
