#include "runtime/ort_backend.h"

#include <cmath>
#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/prompt_prefix.h"
#include "runtime/shared_weights.h"
#include "runtime/testing/token_rows.h"
#include "shared_assets.h"

#include "onnx/onnx_pb.h"

namespace tide::runtime {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

fs::path DistilBertModel() { return tide::testing::SharedAssetPath(tide::testing::kTinyDistilBertModel); }

// ("what is panda?", "The giant panda is a bear species endemic to China.") with bert-base-uncased.
const std::vector<int64_t> kPandaIds = {101,  2054, 2003, 25462, 1029, 102,  1996, 5016, 25462,
                                        2003, 1037, 4562, 2427,  7320, 2000, 2859, 1012, 102};

using testing::PackRows;

TEST(OrtBackendDistilBertTest, DiscoversSignature) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  auto backend = OrtBackend::Create({.model_path = DistilBertModel().string()});
  ASSERT_TRUE(backend.ok()) << backend.status();
  const ModelSignature& s = (*backend)->signature();
  EXPECT_EQ(s.input_ids_name, "input_ids");
  EXPECT_EQ(s.attention_mask_name, "attention_mask");
  EXPECT_EQ(s.token_type_ids_name, "");
  EXPECT_EQ(s.logits_name, "logits");
  EXPECT_FALSE(s.ids_are_int32);
  EXPECT_EQ(s.num_labels, 2);
}

TEST(OrtBackendDistilBertTest, PandaLogitsMatchReference) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  // Reference from ../shared/assets/models/tiny-distilbert-classification/SOURCE.txt
  // (onnxruntime-node on the same ids).
  const float kReference[2] = {0.00032029501744545996f, -0.00020017904171254486f};
  for (auto level : {GraphOptimization::kAll, GraphOptimization::kDisable}) {
    auto backend = OrtBackend::Create({.model_path = DistilBertModel().string(),
                                       .intra_op_threads = 1,
                                       .graph_optimization_level = level});
    ASSERT_TRUE(backend.ok()) << backend.status();
    Logits out;
    ASSERT_TRUE((*backend)->Run(PackRows({kPandaIds}), &out).ok());
    ASSERT_EQ(out.batch, 1);
    ASSERT_EQ(out.num_labels, 2);
    EXPECT_NEAR(out.at(0, 0), kReference[0], 1e-5);
    EXPECT_NEAR(out.at(0, 1), kReference[1], 1e-5);
  }
}

TEST(OrtBackendDistilBertTest, BatchedRowsEqualSingleRuns) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  auto backend = OrtBackend::Create({.model_path = DistilBertModel().string(), .intra_op_threads = 1});
  ASSERT_TRUE(backend.ok()) << backend.status();
  std::vector<std::vector<int64_t>> rows = {
      kPandaIds,
      {101, 2054, 2003, 25462, 1029, 102, 1996, 5016, 102},
      {101, 7592, 2088, 102},
  };
  std::vector<Logits> single(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_TRUE((*backend)->Run(PackRows({rows[i]}), &single[i]).ok());
  }
  Logits batched;
  ASSERT_TRUE((*backend)->Run(PackRows(rows), &batched).ok());  // padded to 18 with mask 0
  ASSERT_EQ(batched.batch, 3);
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int l = 0; l < 2; ++l) EXPECT_NEAR(batched.at(i, l), single[i].at(0, l), 1e-5) << i << "," << l;
  }
  // This export's hidden size is 2, so LayerNorm leaves it little to tell inputs apart and the
  // three rows give (nearly) the same logits: BatchedRowsEqualSingleRunsSumModel below checks the
  // same property on a model whose rows differ.
  // Reusing the same output buffer for a smaller batch.
  ASSERT_TRUE((*backend)->Run(PackRows({rows[2]}), &batched).ok());
  EXPECT_EQ(batched.values.size(), 2u);
  EXPECT_NEAR(batched.at(0, 0), single[2].at(0, 0), 1e-6);
}

TEST(OrtBackendDistilBertTest, RejectsInconsistentShapes) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  auto backend = OrtBackend::Create({.model_path = DistilBertModel().string()});
  ASSERT_TRUE(backend.ok());
  TokenBatch b = PackRows({kPandaIds});
  b.attention_mask.pop_back();
  Logits out;
  absl::Status s = (*backend)->Run(b, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  TokenBatch empty;
  EXPECT_EQ((*backend)->Run(empty, &out).code(), absl::StatusCode::kInvalidArgument);
}

// The terminator sets ONNX Runtime's terminate flag on the backend's run options: a Run answers
// CANCELLED (not a backend failure) until Reset, and then runs as before.
TEST(OrtBackendDistilBertTest, ATerminatedRunAnswersCancelledUntilReset) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  auto backend = OrtBackend::Create({.model_path = DistilBertModel().string(), .intra_op_threads = 1});
  ASSERT_TRUE(backend.ok()) << backend.status();
  RunTerminator* terminator = (*backend)->terminator();
  ASSERT_NE(terminator, nullptr);
  EXPECT_FALSE(terminator->terminated());
  Logits out;
  terminator->Terminate();
  EXPECT_TRUE(terminator->terminated());
  absl::Status s = (*backend)->Run(PackRows({kPandaIds}), &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  terminator->Reset();
  EXPECT_FALSE(terminator->terminated());
  ASSERT_TRUE((*backend)->Run(PackRows({kPandaIds}), &out).ok());
  EXPECT_EQ(out.batch, 1);
}

TEST(OrtBackendTest, MissingAndCorruptModels) {
  auto missing = OrtBackend::Create({.model_path = "no/such/model.onnx"});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no/such/model.onnx"));
  auto corrupt = OrtBackend::Create({.model_data = "this is not an onnx model"});
  ASSERT_FALSE(corrupt.ok());
  EXPECT_FALSE(OrtBackend::Create({}).ok());
}

// A tiny graph: score = ReduceSum(float((input_ids * attention_mask) [+ token_type_ids]), axis 1),
// with the token type and output label dim chosen by the test.
std::string SumModel(onnx::TensorProto::DataType id_type, bool with_types, bool dynamic_labels,
                     const std::string& ids_name = "input_ids") {
  onnx::ModelProto model;
  model.set_ir_version(7);
  model.add_opset_import()->set_version(11);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("sum");
  auto add_input = [&](const std::string& name) {
    onnx::ValueInfoProto* in = g->add_input();
    in->set_name(name);
    auto* t = in->mutable_type()->mutable_tensor_type();
    t->set_elem_type(id_type);
    t->mutable_shape()->add_dim()->set_dim_param("batch");
    t->mutable_shape()->add_dim()->set_dim_param("sequence");
  };
  add_input(ids_name);
  add_input("attention_mask");
  if (with_types) add_input("token_type_ids");
  auto node = [&](const std::string& op, std::vector<std::string> in, const std::string& out) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    for (auto& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  };
  node("Mul", {ids_name, "attention_mask"}, "masked");
  std::string summed = "masked";
  if (with_types) {
    node("Add", {"masked", "token_type_ids"}, "typed");
    summed = "typed";
  }
  auto* cast = node("Cast", {summed}, "as_float");
  auto* to = cast->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(onnx::TensorProto::FLOAT);
  if (dynamic_labels) {
    // Output the per-token values: [batch, sequence], a label dim only known at run time.
    node("Identity", {"as_float"}, "score");
  } else {
    auto* reduce = node("ReduceSum", {"as_float"}, "score");
    auto* axes = reduce->add_attribute();
    axes->set_name("axes");
    axes->set_type(onnx::AttributeProto::INTS);
    axes->add_ints(1);
    auto* keep = reduce->add_attribute();
    keep->set_name("keepdims");
    keep->set_type(onnx::AttributeProto::INT);
    keep->set_i(1);
  }
  onnx::ValueInfoProto* out = g->add_output();
  out->set_name("score");
  auto* t = out->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("batch");
  if (dynamic_labels) t->mutable_shape()->add_dim()->set_dim_param("labels");
  else t->mutable_shape()->add_dim()->set_dim_value(1);
  return model.SerializeAsString();
}

std::vector<float> ExpectedSums(const TokenBatch& b) {
  std::vector<float> sums(b.batch, 0.0f);
  for (int64_t i = 0; i < b.batch; ++i) {
    for (int64_t j = 0; j < b.seq_len; ++j) {
      const size_t k = i * b.seq_len + j;
      sums[i] += static_cast<float>(b.input_ids[k] * b.attention_mask[k] +
                                    (b.token_type_ids.empty() ? 0 : b.token_type_ids[k]));
    }
  }
  return sums;
}

TEST(OrtBackendTest, Int32IdsAreConverted) {
  auto backend = OrtBackend::Create({.model_data = SumModel(onnx::TensorProto::INT32, false, false)});
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_TRUE((*backend)->signature().ids_are_int32);
  EXPECT_EQ((*backend)->signature().logits_name, "score");
  EXPECT_EQ((*backend)->signature().num_labels, 1);
  TokenBatch b = PackRows({{101, 7, 9, 102}, {101, 5, 102}});
  Logits out;
  for (int round = 0; round < 2; ++round) {  // the second run reuses the conversion buffers
    ASSERT_TRUE((*backend)->Run(b, &out).ok());
    ASSERT_EQ(out.batch, 2);
    ASSERT_EQ(out.num_labels, 1);
    EXPECT_THAT(out.values, ::testing::ElementsAreArray(ExpectedSums(b)));
    b.input_ids[1] = 1000;
  }
  TokenBatch too_big = PackRows({{int64_t{1} << 40}});
  EXPECT_EQ((*backend)->Run(too_big, &out).code(), absl::StatusCode::kInvalidArgument);
}

TEST(OrtBackendTest, TokenTypeIdsFedOrZeroFilled) {
  auto backend = OrtBackend::Create({.model_data = SumModel(onnx::TensorProto::INT64, true, false)});
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->signature().token_type_ids_name, "token_type_ids");
  TokenBatch b = PackRows({{101, 7, 102, 9, 102}, {101, 3, 102}}, /*with_types=*/true);
  b.token_type_ids = {0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
  Logits out;
  ASSERT_TRUE((*backend)->Run(b, &out).ok());
  EXPECT_THAT(out.values, ::testing::ElementsAreArray(ExpectedSums(b)));
  b.token_type_ids.clear();  // a tokenizer without type ids: zeros are fed
  ASSERT_TRUE((*backend)->Run(b, &out).ok());
  EXPECT_THAT(out.values, ::testing::ElementsAreArray(ExpectedSums(b)));
  b.token_type_ids = {1, 2};  // present but the wrong size
  EXPECT_EQ((*backend)->Run(b, &out).code(), absl::StatusCode::kInvalidArgument);
}

// score = ReduceSum(Gather(table[2 x 1], token_type_ids), axis 1): a token-type embedding of two
// rows, which ONNX Runtime refuses to index with 2 (as the real BERT graphs do).
std::string TypeEmbeddingModel() {
  onnx::ModelProto model;
  model.set_ir_version(7);
  model.add_opset_import()->set_version(11);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("types");
  for (const char* name : {"input_ids", "attention_mask", "token_type_ids"}) {
    onnx::ValueInfoProto* in = g->add_input();
    in->set_name(name);
    auto* t = in->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::INT64);
    t->mutable_shape()->add_dim()->set_dim_param("batch");
    t->mutable_shape()->add_dim()->set_dim_param("sequence");
  }
  onnx::TensorProto* table = g->add_initializer();
  table->set_name("type_table");
  table->set_data_type(onnx::TensorProto::FLOAT);
  table->add_dims(2);
  table->add_dims(1);
  table->add_float_data(0.5f);
  table->add_float_data(2.0f);
  onnx::NodeProto* gather = g->add_node();
  gather->set_op_type("Gather");
  gather->add_input("type_table");
  gather->add_input("token_type_ids");
  gather->add_output("embedded");  // [batch, sequence, 1]
  onnx::NodeProto* reduce = g->add_node();
  reduce->set_op_type("ReduceSum");
  reduce->add_input("embedded");
  reduce->add_output("score");
  auto* axes = reduce->add_attribute();
  axes->set_name("axes");
  axes->set_type(onnx::AttributeProto::INTS);
  axes->add_ints(1);
  auto* keep = reduce->add_attribute();
  keep->set_name("keepdims");
  keep->set_type(onnx::AttributeProto::INT);
  keep->set_i(0);
  onnx::ValueInfoProto* out = g->add_output();
  out->set_name("score");
  auto* t = out->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("batch");
  t->mutable_shape()->add_dim()->set_dim_value(1);
  return model.SerializeAsString();
}

// An index ONNX Runtime rejects (its ORT_INVALID_ARGUMENT) is an engine failure: INTERNAL, never
// the INVALID_ARGUMENT that the edge would answer as a client's 400.
TEST(OrtBackendTest, EngineRejectionOfABatchIsInternalWithTheEngineTextKept) {
  auto backend = OrtBackend::Create({.model_data = TypeEmbeddingModel()});
  ASSERT_TRUE(backend.ok()) << backend.status();
  TokenBatch b = PackRows({{101, 7, 102}}, /*with_types=*/true);
  b.token_type_ids = {0, 1, 1};
  Logits out;
  ASSERT_TRUE((*backend)->Run(b, &out).ok());
  EXPECT_FLOAT_EQ(out.values[0], 4.5f);
  b.token_type_ids = {0, 0, 2};
  absl::Status s = (*backend)->Run(b, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), HasSubstr("onnxruntime Run ("));
  b.token_type_ids = {0, 1, 1};  // the session is still usable
  EXPECT_TRUE((*backend)->Run(b, &out).ok());
}

TEST(OrtBackendTest, DynamicLabelDimIsAllocatedByOnnxRuntime) {
  auto backend = OrtBackend::Create({.model_data = SumModel(onnx::TensorProto::INT64, false, true)});
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->signature().num_labels, -1);
  TokenBatch b = PackRows({{101, 7, 102}, {101, 102}});
  Logits out;
  ASSERT_TRUE((*backend)->Run(b, &out).ok());
  EXPECT_EQ(out.batch, 2);
  EXPECT_EQ(out.num_labels, 3);
  EXPECT_THAT(out.values, ::testing::ElementsAre(101, 7, 102, 101, 102, 0));
}

// SumModel with a second output before "score": token_embeddings [batch, sequence, 1], each
// position's masked id (an embedder's token states, hidden size 1).
std::string TokenStatesModel() {
  onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromString(SumModel(onnx::TensorProto::INT64, false, false)));
  onnx::GraphProto* g = model.mutable_graph();
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Unsqueeze");
  n->add_input("as_float");
  n->add_output("token_embeddings");
  auto* axes = n->add_attribute();
  axes->set_name("axes");
  axes->set_type(onnx::AttributeProto::INTS);
  axes->add_ints(2);
  onnx::ValueInfoProto* out = g->add_output();
  out->set_name("token_embeddings");
  auto* t = out->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("batch");
  t->mutable_shape()->add_dim()->set_dim_param("sequence");
  t->mutable_shape()->add_dim()->set_dim_value(1);
  g->mutable_output()->SwapElements(0, 1);  // the rank-3 output first: still not taken for the logits
  return model.SerializeAsString();
}

// The token states are fetched only for a batch that asks (TokenBatch::token_states), from the same
// Run as the logits; a model without them leaves them empty even when asked.
TEST(OrtBackendTest, TokenStatesOnlyWhenAsked) {
  auto backend = OrtBackend::Create({.model_data = TokenStatesModel()});
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->signature().logits_name, "score");
  EXPECT_EQ((*backend)->signature().token_embeddings_name, "token_embeddings");
  TokenBatch b = PackRows({{101, 7, 102}, {101, 102}});
  Logits out;
  ASSERT_TRUE((*backend)->Run(b, &out).ok());
  EXPECT_THAT(out.values, ::testing::ElementsAreArray(ExpectedSums(b)));
  EXPECT_TRUE(out.token_states.empty());
  EXPECT_EQ(out.hidden, 0);
  b.token_states = true;
  ASSERT_TRUE((*backend)->Run(b, &out).ok());
  EXPECT_THAT(out.values, ::testing::ElementsAreArray(ExpectedSums(b)));
  EXPECT_EQ(out.hidden, 1);
  EXPECT_THAT(out.token_states, ::testing::ElementsAre(101, 7, 102, 101, 102, 0));
  EXPECT_EQ(*out.states_of(1, b.seq_len), 101);
  b.token_states = false;  // the next batch that does not ask gets none again
  ASSERT_TRUE((*backend)->Run(b, &out).ok());
  EXPECT_TRUE(out.token_states.empty());

  auto plain = OrtBackend::Create({.model_data = SumModel(onnx::TensorProto::INT64, false, false)});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE((*plain)->signature().token_embeddings_name.empty());
  b.token_states = true;
  ASSERT_TRUE((*plain)->Run(b, &out).ok());
  EXPECT_TRUE(out.token_states.empty());
}

TEST(OrtBackendTest, BatchedRowsEqualSingleRunsSumModel) {
  auto backend = OrtBackend::Create({.model_data = SumModel(onnx::TensorProto::INT32, false, false)});
  ASSERT_TRUE(backend.ok()) << backend.status();
  std::vector<std::vector<int64_t>> rows = {{101, 7, 9, 11, 102}, {101, 5, 102}, {101, 102}};
  Logits batched, single;
  ASSERT_TRUE((*backend)->Run(PackRows(rows), &batched).ok());
  ASSERT_EQ(batched.batch, 3);
  std::vector<float> seen;
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_TRUE((*backend)->Run(PackRows({rows[i]}), &single).ok());
    EXPECT_EQ(batched.at(i, 0), single.at(0, 0)) << i;
    seen.push_back(single.at(0, 0));
  }
  EXPECT_NE(seen[0], seen[1]);
  EXPECT_NE(seen[1], seen[2]);
}

// thread_layout adaptive: a second session with more intra-op threads, RunAlone on it; the same
// model gives the same logits on either session.
TEST(OrtBackendTest, AloneSessionGivesTheSameLogits) {
  const std::string model = SumModel(onnx::TensorProto::INT64, false, false);
  auto narrow = OrtBackend::Create({.model_data = model, .intra_op_threads = 1});
  ASSERT_TRUE(narrow.ok()) << narrow.status();
  EXPECT_FALSE((*narrow)->has_alone_session());
  auto wide = OrtBackend::Create({.model_data = model, .intra_op_threads = 1, .alone_intra_op_threads = 2,
                                  .alone_session = nullptr, .shared_weights = std::make_shared<SharedWeights>()});
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_TRUE((*wide)->has_alone_session());
  std::vector<std::vector<int64_t>> rows = {{101, 7, 9, 11, 102}, {101, 5, 102}};
  Logits run, alone;
  ASSERT_TRUE((*wide)->Run(PackRows(rows), &run).ok());
  ASSERT_TRUE((*wide)->RunAlone(PackRows(rows), &alone).ok());
  EXPECT_EQ(run.values, alone.values);
  EXPECT_NE(run.values[0], run.values[1]);
  // Without a wider session RunAlone is Run.
  ASSERT_TRUE((*narrow)->RunAlone(PackRows(rows), &alone).ok());
  EXPECT_EQ(run.values, alone.values);
}

// One wider session per model version: the instances given the same slot share it, and it
// closes with the last of them.
TEST(OrtBackendTest, InstancesShareOneAloneSession) {
  const std::string model = SumModel(onnx::TensorProto::INT64, false, false);
  auto slot = std::make_shared<AloneSessionSlot>();
  int opened = 0;
  auto counting_open = [&]() -> absl::StatusOr<std::shared_ptr<Ort::Session>> {
    ++opened;
    return absl::InternalError("not used");
  };
  OrtOptions o{.model_data = model, .intra_op_threads = 1, .alone_intra_op_threads = 2, .alone_session = slot};
  auto a = OrtBackend::Create(o);
  auto b = OrtBackend::Create(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE((*a)->has_alone_session() && (*b)->has_alone_session());
  auto live = slot->Get(counting_open);  // the backends' session is live: nothing is opened
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(opened, 0);
  EXPECT_EQ(live->use_count(), 3);  // a, b and `live`
  live->reset();
  a->reset();
  b->reset();
  EXPECT_FALSE(slot->Get(counting_open).ok());  // closed with the last backend: opens anew
  EXPECT_EQ(opened, 1);
}

TEST(OrtBackendTest, RejectsModelsTideCannotFeed) {
  auto odd = OrtBackend::Create({.model_data = SumModel(onnx::TensorProto::INT64, false, false, "pixel_values")});
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(odd.status().message(), HasSubstr("pixel_values"));
  auto floats = OrtBackend::Create({.model_data = SumModel(onnx::TensorProto::FLOAT, false, false)});
  ASSERT_FALSE(floats.ok());
  EXPECT_THAT(floats.status().message(), HasSubstr("input_ids"));
}
// A prompt prefix input (optimize/prompt_prefix.h's naming) that is not float [1, prefix, width], or
// one without its output, is refused naming it; a well-formed slot is found with its width.
TEST(OrtBackendTest, PromptPrefixSlotsMustFit) {
  auto with_prefix_input = [](int elem, std::vector<int64_t> dims, bool with_output) {
    onnx::ModelProto model;
    EXPECT_TRUE(model.ParseFromString(SumModel(onnx::TensorProto::INT64, false, false)));
    onnx::GraphProto* g = model.mutable_graph();
    onnx::ValueInfoProto* in = g->add_input();
    in->set_name("tide_prefix_key.0");
    auto* t = in->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    for (int64_t d : dims) {
      if (d > 0) t->mutable_shape()->add_dim()->set_dim_value(d); else t->mutable_shape()->add_dim()->set_dim_param("p");
    }
    if (with_output) {
      onnx::NodeProto* n = g->add_node();
      n->set_op_type("Identity");
      n->add_input("tide_prefix_key.0");
      n->add_output("tide_present_key.0");
      onnx::ValueInfoProto* out = g->add_output();
      out->set_name("tide_present_key.0");
      out->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
    }
    return model.SerializeAsString();
  };
  auto rank2 = OrtBackend::Create({.model_data = with_prefix_input(onnx::TensorProto::FLOAT, {1, -1}, true)});
  ASSERT_FALSE(rank2.ok());
  EXPECT_EQ(rank2.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(rank2.status().message(),
              HasSubstr("prompt prefix input \"tide_prefix_key.0\" has shape [1, -1]; expected float [1, prefix, width]"));
  auto no_output = OrtBackend::Create({.model_data = with_prefix_input(onnx::TensorProto::FLOAT, {1, -1, 8}, false)});
  ASSERT_FALSE(no_output.ok());
  EXPECT_THAT(no_output.status().message(),
              HasSubstr("prompt prefix input \"tide_prefix_key.0\" has no output \"tide_present_key.0\""));
  auto good = OrtBackend::Create({.model_data = with_prefix_input(onnx::TensorProto::FLOAT, {1, -1, 8}, true)});
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_EQ((*good)->signature().prompt_prefix.size(), 1u);
  EXPECT_EQ((*good)->signature().prompt_prefix[0].output, "tide_present_key.0");
  EXPECT_EQ((*good)->signature().prompt_prefix[0].width, 8);
  // Without a prefix the slot gets an empty one: the model runs as before.
  TokenBatch batch;
  batch.Resize(1, 3, false);
  batch.input_ids = {1, 2, 3};
  batch.attention_mask = {1, 1, 1};
  Logits out;
  ASSERT_TRUE((*good)->Run(batch, &out).ok());
  EXPECT_EQ(out.prompt_prefix_tokens, 0);
  // A prefix of the wrong width is refused when an instance opens.
  auto wrong = std::make_shared<PromptPrefix>();
  wrong->ids = {1, 2};
  wrong->values = {std::vector<float>(2 * 7)};
  auto refused = OrtBackend::Create({.model_data = with_prefix_input(onnx::TensorProto::FLOAT, {1, -1, 8}, true),
                                     .prompt_prefix = wrong});
  EXPECT_THAT(refused.status().message(), HasSubstr("the prompt prefix was not computed for this model"));
  // One that fits: a batch whose rows start with its ids runs their tokens after it.
  auto fits = std::make_shared<PromptPrefix>();
  fits->ids = {1, 2};
  fits->values = {std::vector<float>(2 * 8)};
  auto prefixed = OrtBackend::Create({.model_data = with_prefix_input(onnx::TensorProto::FLOAT, {1, -1, 8}, true),
                                      .prompt_prefix = fits});
  ASSERT_TRUE(prefixed.ok()) << prefixed.status();
  ASSERT_TRUE((*prefixed)->Run(batch, &out).ok());
  EXPECT_EQ(out.prompt_prefix_tokens, 2);
  EXPECT_EQ((*prefixed)->prefixed_runs(), 1);
  batch.input_ids = {1, 5, 3};
  ASSERT_TRUE((*prefixed)->Run(batch, &out).ok());
  EXPECT_EQ(out.prompt_prefix_tokens, 0);
}

}  // namespace
}  // namespace tide::runtime
