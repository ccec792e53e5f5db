#include "server/grpc/kserve_proto.h"

#include <cstring>
#include <string>

#include "common/error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tide::grpc_edge {
namespace {

using ::testing::HasSubstr;

inference::ModelInferRequest TokenRequest() {
  inference::ModelInferRequest r;
  r.set_id("req-1");
  auto* in = r.add_inputs();
  in->set_name("input_ids");
  in->set_datatype("INT64");
  in->add_shape(1);
  in->add_shape(3);
  for (int64_t v : {101, 7592, 102}) in->mutable_contents()->add_int64_contents(v);
  return r;
}

std::string RawInt64(std::initializer_list<int64_t> values) {
  std::string out;
  for (int64_t v : values) {
    char b[8];
    std::memcpy(b, &v, 8);  // little-endian host (x86-64, aarch64)
    out.append(b, 8);
  }
  return out;
}

TEST(InferRequestFromProto, TypedContents) {
  auto r = InferRequestFromProto(TokenRequest(), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->id, "req-1");
  ASSERT_EQ(r->inputs.size(), 1u);
  EXPECT_EQ(r->inputs[0].datatype, api::DataType::kInt64);
  EXPECT_EQ(std::get<std::vector<int64_t>>(r->inputs[0].data), (std::vector<int64_t>{101, 7592, 102}));
  EXPECT_FALSE(r->binary_data_output);
}

TEST(InferRequestFromProto, RawContentsAndRawOutputs) {
  inference::ModelInferRequest p = TokenRequest();
  p.mutable_inputs(0)->clear_contents();
  p.add_raw_input_contents(RawInt64({101, 7592, 102}));
  auto r = InferRequestFromProto(p, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(std::get<std::vector<int64_t>>(r->inputs[0].data), (std::vector<int64_t>{101, 7592, 102}));
  EXPECT_TRUE(r->binary_data_output);
}

TEST(InferRequestFromProto, BytesText) {
  inference::ModelInferRequest p;
  auto* in = p.add_inputs();
  in->set_name("text");
  in->set_datatype("BYTES");
  in->add_shape(2);
  in->mutable_contents()->add_bytes_contents("a panda");
  in->mutable_contents()->add_bytes_contents("Paris");
  auto r = InferRequestFromProto(p, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(std::get<std::vector<std::string>>(r->inputs[0].data), (std::vector<std::string>{"a panda", "Paris"}));
}

TEST(InferRequestFromProto, Refusals) {
  auto expect_invalid = [](const inference::ModelInferRequest& p, const char* words) {
    auto r = InferRequestFromProto(p, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(KindOf(r.status()), ErrorKind::kInvalidInput) << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(words));
  };
  expect_invalid(inference::ModelInferRequest(), "'inputs' must not be empty");
  {
    auto p = TokenRequest();
    p.mutable_inputs(0)->mutable_contents()->add_int64_contents(5);
    expect_invalid(p, "has 4 elements but shape [1,3] needs 3");
  }
  {
    auto p = TokenRequest();
    p.mutable_inputs(0)->set_datatype("FP16");
    expect_invalid(p, "FP16");
  }
  {
    auto p = TokenRequest();
    p.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.0f);
    expect_invalid(p, "int64_contents only");
  }
  {
    auto p = TokenRequest();
    *p.add_inputs() = p.inputs(0);
    expect_invalid(p, "given more than once");
  }
  {
    auto p = TokenRequest();
    p.add_raw_input_contents(RawInt64({1, 2, 3}));
    expect_invalid(p, "beside raw_input_contents");
  }
  {
    auto p = TokenRequest();
    p.mutable_inputs(0)->clear_contents();
    p.add_raw_input_contents(RawInt64({1, 2}));
    expect_invalid(p, "raw_input_contents[0]");
  }
  {
    auto p = TokenRequest();
    p.mutable_inputs(0)->set_shape(0, 5000);
    expect_invalid(p, "max_documents");
  }
  {
    auto p = TokenRequest();
    (*p.mutable_parameters())["binary_data_output"].set_string_param("yes");
    expect_invalid(p, "binary_data_output' must be a boolean");
  }
  {
    auto p = TokenRequest();
    (*p.mutable_parameters())["timeout"];
    expect_invalid(p, "has no value");
  }
  {
    inference::ModelInferRequest p;
    auto* in = p.add_inputs();
    in->set_name("text");
    in->set_datatype("BYTES");
    in->add_shape(1);
    in->mutable_contents()->add_bytes_contents(std::string("\xff\xfe", 2));
    expect_invalid(p, "not valid UTF-8");
  }
}

TEST(InferResponseToProto, RawOrTyped) {
  api::InferResponse response;
  response.model_name = "m";
  response.model_version = "1";
  response.id = "x";
  response.parameters["degraded"] = true;
  api::Tensor t;
  t.name = "logits";
  t.datatype = api::DataType::kFp32;
  t.shape = {2, 1};
  t.data = std::vector<float>{0.5f, -1.0f};
  response.outputs.push_back(t);

  api::InferRequest typed;
  inference::ModelInferResponse out;
  ASSERT_TRUE(InferResponseToProto(response, typed, &out).ok());
  EXPECT_EQ(out.id(), "x");
  EXPECT_TRUE(out.parameters().at("degraded").bool_param());
  ASSERT_EQ(out.outputs_size(), 1);
  EXPECT_EQ(out.outputs(0).datatype(), "FP32");
  EXPECT_EQ(out.outputs(0).contents().fp32_contents_size(), 2);
  EXPECT_EQ(out.raw_output_contents_size(), 0);

  api::InferRequest raw;
  raw.binary_data_output = true;
  inference::ModelInferResponse out_raw;
  ASSERT_TRUE(InferResponseToProto(response, raw, &out_raw).ok());
  ASSERT_EQ(out_raw.raw_output_contents_size(), 1);
  ASSERT_EQ(out_raw.raw_output_contents(0).size(), 8u);
  float f[2];
  std::memcpy(f, out_raw.raw_output_contents(0).data(), 8);
  EXPECT_EQ(f[0], 0.5f);
  EXPECT_EQ(f[1], -1.0f);
  EXPECT_EQ(out_raw.outputs(0).contents().fp32_contents_size(), 0);
}

}  // namespace
}  // namespace tide::grpc_edge
