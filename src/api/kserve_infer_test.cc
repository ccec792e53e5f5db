#include "api/kserve_infer.h"

#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tide::api {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Little-endian byte builders for binary bodies, written independently of the parser.
void PutLe(uint64_t v, size_t bytes, std::string* out) {
  for (size_t i = 0; i < bytes; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
std::string Int64Bytes(std::initializer_list<int64_t> values) {
  std::string out;
  for (int64_t v : values) PutLe(static_cast<uint64_t>(v), 8, &out);
  return out;
}
std::string Int32Bytes(std::initializer_list<int32_t> values) {
  std::string out;
  for (int32_t v : values) PutLe(static_cast<uint32_t>(v), 4, &out);
  return out;
}
std::string Fp32Bytes(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    PutLe(bits, 4, &out);
  }
  return out;
}
std::string BytesElements(std::initializer_list<std::string> values) {
  std::string out;
  for (const std::string& v : values) {
    PutLe(v.size(), 4, &out);
    out += v;
  }
  return out;
}

absl::StatusOr<InferRequest> ParseBinary(const std::string& json, const std::string& binary,
                                         const RequestLimits& limits = {}) {
  return ParseInferRequest(json + binary, std::to_string(json.size()), limits);
}

TEST(ParseInferRequestTest, FlatAndNestedDataAreEquivalent) {
  absl::StatusOr<InferRequest> flat = ParseInferRequest(
      R"({"id":"r1","inputs":[{"name":"input_ids","shape":[2,3],"datatype":"INT64",
          "data":[1,2,3,4,5,6]}]})",
      std::nullopt);
  absl::StatusOr<InferRequest> nested = ParseInferRequest(
      R"({"id":"r1","inputs":[{"name":"input_ids","shape":[2,3],"datatype":"INT64",
          "data":[[1,2,3],[4,5,6]]}]})",
      std::nullopt);
  ASSERT_TRUE(flat.ok()) << flat.status();
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_EQ(flat->id, "r1");
  ASSERT_EQ(flat->inputs.size(), 1u);
  const Tensor& t = flat->inputs[0];
  EXPECT_EQ(t.name, "input_ids");
  EXPECT_EQ(t.datatype, DataType::kInt64);
  EXPECT_THAT(t.shape, ElementsAre(2, 3));
  EXPECT_THAT(std::get<std::vector<int64_t>>(t.data), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(std::get<std::vector<int64_t>>(nested->inputs[0].data),
            std::get<std::vector<int64_t>>(t.data));
}

TEST(ParseInferRequestTest, AllCarriedDatatypesFromJson) {
  absl::StatusOr<InferRequest> r = ParseInferRequest(
      R"({"inputs":[
        {"name":"a","shape":[2],"datatype":"INT32","data":[-2147483648,2147483647]},
        {"name":"b","shape":[2],"datatype":"INT64","data":[-9223372036854775808,9223372036854775807]},
        {"name":"c","shape":[2],"datatype":"FP32","data":[0.5,-1]},
        {"name":"d","shape":[1],"datatype":"FP64","data":[0.1]},
        {"name":"e","shape":[3],"datatype":"BOOL","data":[true,false,true]},
        {"name":"f","shape":[1,2],"datatype":"BYTES","data":[["query","doc"]]}]})",
      std::nullopt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(std::get<std::vector<int32_t>>(r->inputs[0].data),
              ElementsAre(-2147483647 - 1, 2147483647));
  EXPECT_THAT(std::get<std::vector<int64_t>>(r->inputs[1].data),
              ElementsAre(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
  EXPECT_THAT(std::get<std::vector<float>>(r->inputs[2].data), ElementsAre(0.5f, -1.0f));
  EXPECT_THAT(std::get<std::vector<double>>(r->inputs[3].data), ElementsAre(0.1));
  EXPECT_THAT(std::get<std::vector<uint8_t>>(r->inputs[4].data), ElementsAre(1, 0, 1));
  EXPECT_THAT(std::get<std::vector<std::string>>(r->inputs[5].data), ElementsAre("query", "doc"));
}

TEST(ParseInferRequestTest, ParametersAndRequestedOutputs) {
  absl::StatusOr<InferRequest> r = ParseInferRequest(
      R"({"parameters":{"binary_data_output":true,"truncate":false,"k":3,"t":0.5,"s":"x"},
          "inputs":[{"name":"a","shape":[1],"datatype":"INT64","data":[1]}],
          "outputs":[{"name":"logits","parameters":{"binary_data":false}},{"name":"other"}]})",
      std::nullopt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->binary_data_output);
  EXPECT_EQ(std::get<bool>(r->parameters.at("truncate")), false);
  EXPECT_EQ(std::get<int64_t>(r->parameters.at("k")), 3);
  EXPECT_EQ(std::get<double>(r->parameters.at("t")), 0.5);
  EXPECT_EQ(std::get<std::string>(r->parameters.at("s")), "x");
  ASSERT_EQ(r->outputs.size(), 2u);
  EXPECT_EQ(r->outputs[0].binary_data, false);
  EXPECT_FALSE(r->outputs[1].binary_data.has_value());
  EXPECT_FALSE(OutputWantsBinary(*r, "logits"));   // per-output setting wins
  EXPECT_TRUE(OutputWantsBinary(*r, "other"));     // request default
  EXPECT_TRUE(OutputWantsBinary(*r, "unlisted"));
}

TEST(ParseInferRequestTest, PerOutputBinaryWithoutRequestDefault) {
  absl::StatusOr<InferRequest> r = ParseInferRequest(
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT64","data":[1]}],
          "outputs":[{"name":"logits","parameters":{"binary_data":true}}]})",
      std::nullopt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->binary_data_output);
  EXPECT_TRUE(OutputWantsBinary(*r, "logits"));
  EXPECT_FALSE(OutputWantsBinary(*r, "other"));
}

TEST(ParseInferRequestTest, NestedDataIsFlattenedRowMajorWhateverTheNesting) {
  // Only the element count is checked against the shape, as Triton does.
  absl::StatusOr<InferRequest> r = ParseInferRequest(
      R"({"inputs":[{"name":"a","shape":[2,2],"datatype":"INT32","data":[[1],[2,[3]],4]}]})",
      std::nullopt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(std::get<std::vector<int32_t>>(r->inputs[0].data), ElementsAre(1, 2, 3, 4));
}

TEST(ParseInferRequestTest, BinaryAndJsonFormsAreEquivalent) {
  const std::string json_body =
      R"({"inputs":[{"name":"ids","shape":[2,2],"datatype":"INT64","data":[[1,-2],[3,40000000000]]},
                    {"name":"mask","shape":[4],"datatype":"INT32","data":[1,1,0,-1]},
                    {"name":"x","shape":[2],"datatype":"FP32","data":[0.25,-8.5]},
                    {"name":"t","shape":[2],"datatype":"BYTES","data":["héllo",""]},
                    {"name":"b","shape":[2],"datatype":"BOOL","data":[false,true]}]})";
  const std::string header =
      R"({"inputs":[{"name":"ids","shape":[2,2],"datatype":"INT64","parameters":{"binary_data_size":32}},
                    {"name":"mask","shape":[4],"datatype":"INT32","parameters":{"binary_data_size":16}},
                    {"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}},
                    {"name":"t","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":14}},
                    {"name":"b","shape":[2],"datatype":"BOOL","parameters":{"binary_data_size":2}}]})";
  const std::string binary = Int64Bytes({1, -2, 3, 40000000000}) + Int32Bytes({1, 1, 0, -1}) +
                             Fp32Bytes({0.25f, -8.5f}) + BytesElements({"héllo", ""}) +
                             std::string("\x00\x01", 2);
  absl::StatusOr<InferRequest> from_json = ParseInferRequest(json_body, std::nullopt);
  absl::StatusOr<InferRequest> from_binary = ParseBinary(header, binary);
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  ASSERT_TRUE(from_binary.ok()) << from_binary.status();
  ASSERT_EQ(from_json->inputs.size(), from_binary->inputs.size());
  for (size_t i = 0; i < from_json->inputs.size(); ++i) {
    SCOPED_TRACE(from_json->inputs[i].name);
    EXPECT_EQ(from_json->inputs[i].name, from_binary->inputs[i].name);
    EXPECT_EQ(from_json->inputs[i].datatype, from_binary->inputs[i].datatype);
    EXPECT_EQ(from_json->inputs[i].shape, from_binary->inputs[i].shape);
    EXPECT_EQ(from_json->inputs[i].data, from_binary->inputs[i].data);
  }
}

TEST(ParseInferRequestTest, HeaderWithOnlyJsonAndMixedInputs) {
  const std::string header =
      R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT64","data":[7]},
                    {"name":"b","shape":[1],"datatype":"INT32","parameters":{"binary_data_size":4}}]})";
  absl::StatusOr<InferRequest> r = ParseBinary(header, Int32Bytes({-9}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(std::get<std::vector<int64_t>>(r->inputs[0].data), ElementsAre(7));
  EXPECT_THAT(std::get<std::vector<int32_t>>(r->inputs[1].data), ElementsAre(-9));
  // Header equal to the body length: no binary section at all.
  const std::string plain = R"({"inputs":[{"name":"a","shape":[0],"datatype":"FP32","data":[]}]})";
  r = ParseInferRequest(plain, std::to_string(plain.size()));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(std::get<std::vector<float>>(r->inputs[0].data).empty());
}

struct ErrorCase {
  std::string body;
  std::optional<std::string> header;
  absl::StatusCode code;
  std::string part;
};

TEST(ParseInferRequestTest, JsonErrors) {
  const auto fp = absl::StatusCode::kFailedPrecondition;
  const std::vector<ErrorCase> cases = {
      {R"({"inputs":[)", std::nullopt, absl::StatusCode::kInvalidArgument, "JSON"},
      {R"({})", std::nullopt, fp, "'inputs'"},
      {R"({"inputs":[]})", std::nullopt, fp, "'inputs' must not be empty"},
      {R"({"inputs":[1]})", std::nullopt, fp, "'inputs[0]' must be an object"},
      {R"({"inputs":[{"shape":[1],"datatype":"INT64","data":[1]}]})", std::nullopt, fp, "'inputs[0].name'"},
      {R"({"inputs":[{"name":"a","datatype":"INT64","data":[1]}]})", std::nullopt, fp, "'inputs[0].shape'"},
      {R"({"inputs":[{"name":"a","shape":[1],"data":[1]}]})", std::nullopt, fp, "'inputs[0].datatype'"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT64"}]})", std::nullopt, fp, "'inputs[0].data'"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT64","data":1}]})", std::nullopt, fp, "'inputs[0].data' must be an array"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"COMPLEX","data":[1]}]})", std::nullopt, fp, "unknown datatype \"COMPLEX\""},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP16","data":[1]}]})", std::nullopt, fp, "FP16 is not supported"},
      {R"({"inputs":[{"name":"a","shape":[-1],"datatype":"INT64","data":[1]}]})", std::nullopt, fp, "'inputs[0].shape': dimension 0 is negative"},
      {R"({"inputs":[{"name":"a","shape":[1.5],"datatype":"INT64","data":[1]}]})", std::nullopt, fp, "'inputs[0].shape[0]' must be an integer"},
      {R"({"inputs":[{"name":"a","shape":[1,4294967296,4294967296,4294967296],"datatype":"INT64","data":[1]}]})", std::nullopt, fp, "max_batch_tensor_elements"},
      {R"({"inputs":[{"name":"a","shape":[2,3],"datatype":"INT64","data":[1,2,3]}]})", std::nullopt, fp, "'inputs[0].data' has 3 elements but shape [2,3] needs 6"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT64","data":[1,2]}]})", std::nullopt, fp, "has more than 1 elements"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT32","data":[2147483648]}]})", std::nullopt, fp, "INT32 range"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT64","data":[1.5]}]})", std::nullopt, fp, "'inputs[0].data' element 0 must be an integer"},
      {R"({"inputs":[{"name":"a","shape":[2],"datatype":"INT64","data":[1,"2"]}]})", std::nullopt, fp, "element 1 must be an integer in the INT64 range; got string"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1e300]}]})", std::nullopt, fp, "FP32 range"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"BOOL","data":[1]}]})", std::nullopt, fp, "BOOL"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"BYTES","data":[1]}]})", std::nullopt, fp, "a string (BYTES)"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT64","data":[1]},{"name":"a","shape":[1],"datatype":"INT64","data":[1]}]})", std::nullopt, fp, "given more than once"},
      {R"({"parameters":{"binary_data_output":1},"inputs":[{"name":"a","shape":[1],"datatype":"INT64","data":[1]}]})", std::nullopt, fp, "binary_data_output"},
      {R"({"parameters":{"x":[1]},"inputs":[{"name":"a","shape":[1],"datatype":"INT64","data":[1]}]})", std::nullopt, fp, "'parameters.x'"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT64","data":[1]}],"outputs":[{"parameters":{}}]})", std::nullopt, fp, "'outputs[0].name'"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT64","data":[1]}],"outputs":[{"name":"o","parameters":{"binary_data":"yes"}}]})", std::nullopt, fp, "outputs[0].parameters.binary_data"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT64","parameters":{"binary_data_size":8}}]})", std::nullopt, fp, "Inference-Header-Content-Length"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.body);
    absl::StatusOr<InferRequest> r = ParseInferRequest(
        c.body, c.header ? std::optional<std::string_view>(*c.header) : std::nullopt);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), c.code) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(c.part));
  }
}

TEST(ParseInferRequestTest, BinaryErrors) {
  const auto fp = absl::StatusCode::kFailedPrecondition;
  auto header_for = [](const std::string& datatype, const std::string& shape, int64_t size) {
    return R"({"inputs":[{"name":"a","shape":)" + shape + R"(,"datatype":")" + datatype +
           R"(","parameters":{"binary_data_size":)" + std::to_string(size) + "}}]}";
  };
  struct Case {
    std::string json;
    std::string binary;
    absl::StatusCode code;
    std::string part;
  };
  const std::vector<Case> cases = {
      {header_for("INT64", "[2]", 16), Int64Bytes({1}), fp, "only 8 bytes of binary data remain"},
      {header_for("INT64", "[2]", 8), Int64Bytes({1}), fp, "need 2 x 8 bytes"},
      {header_for("INT64", "[1]", 8), Int64Bytes({1, 2}), fp, "16 bytes after the JSON"},
      {header_for("INT64", "[1]", -8), Int64Bytes({1}), fp, "binary_data_size' must be a non-negative"},
      {header_for("BOOL", "[1]", 1), std::string("\x02", 1), fp, "must be 0 or 1"},
      {header_for("BYTES", "[1]", 7), BytesElements({"ab"}) + "x", fp, "binary_data_size is 7 but the 1 BYTES elements use 6"},
      {header_for("BYTES", "[2]", 7), BytesElements({"abc"}), fp, "too small for 2 BYTES elements"},
      {header_for("BYTES", "[1]", 6), std::string("\x09\x00\x00\x00" "ab", 6), fp, "claims 9 bytes but only 2 remain"},
      {header_for("BYTES", "[1]", 6), std::string("\x02\x00\x00\x00\xc3\x28", 6), fp, "not valid UTF-8"},
      {header_for("BYTES", "[1]", 8), std::string("\x04\x00\x00\x00\xed\xa0\x80\x41", 8), fp, "not valid UTF-8"},
      {R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT64","data":[1],"parameters":{"binary_data_size":8}}]})",
       Int64Bytes({1}), fp, "both 'data' and parameters.binary_data_size"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    absl::StatusOr<InferRequest> r = ParseBinary(c.json, c.binary);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), c.code) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(c.part));
  }
  // The BYTES section that really is 11 bytes for 1 element of 7 is fine.
  EXPECT_TRUE(ParseBinary(header_for("BYTES", "[1]", 11), BytesElements({"abcdefg"})).ok());
}

TEST(ParseInferRequestTest, HeaderValueErrorsAreInvalidArgument) {
  const std::string body = R"({"inputs":[{"name":"a","shape":[1],"datatype":"INT64","data":[1]}]})";
  for (const std::string header : {"abc", "-1", "", "12x", "99999999999999999999999"}) {
    SCOPED_TRACE(header);
    absl::StatusOr<InferRequest> r = ParseInferRequest(body, header);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("Inference-Header-Content-Length"));
  }
  absl::StatusOr<InferRequest> r = ParseInferRequest(body, std::to_string(body.size() + 1));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("the body has only"));
  // A header that cuts the JSON short is a JSON syntax error.
  EXPECT_EQ(ParseInferRequest(body, "10").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParseInferRequestTest, LimitsAreEnforcedBeforeAllocation) {
  RequestLimits limits;
  limits.max_batch_tensor_elements = 4;
  absl::StatusOr<InferRequest> r = ParseInferRequest(
      R"({"inputs":[{"name":"a","shape":[5],"datatype":"INT64","data":[1,2,3,4,5]}]})",
      std::nullopt, limits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("max_batch_tensor_elements=4"));
  // A huge claimed shape with a tiny binary section fails on the count, not on allocation.
  RequestLimits many_rows;
  many_rows.max_documents = 10000000;
  r = ParseBinary(R"({"inputs":[{"name":"a","shape":[1000000],"datatype":"BYTES","parameters":{"binary_data_size":4}}]})",
                  BytesElements({""}), many_rows);
  EXPECT_THAT(r.status().message(), HasSubstr("too small for 1000000 BYTES elements"));
  r = ParseInferRequest(
      R"({"inputs":[{"name":"a","shape":[4000000],"datatype":"INT64","data":[1]}]})", std::nullopt, many_rows);
  EXPECT_THAT(r.status().message(), HasSubstr("has 1 elements but shape [4000000] needs 4000000"));
  // Zero dims make an empty tensor even next to huge ones.
  r = ParseInferRequest(
      R"({"inputs":[{"name":"a","shape":[0,9223372036854775807],"datatype":"INT64","data":[]}]})",
      std::nullopt);
  EXPECT_TRUE(r.ok()) << r.status();

  limits = RequestLimits{};
  limits.max_text_chars = 3;
  r = ParseInferRequest(R"({"inputs":[{"name":"a","shape":[1],"datatype":"BYTES","data":["abcd"]}]})",
                        std::nullopt, limits);
  EXPECT_THAT(r.status().message(), HasSubstr("max_text_chars=3"));
  r = ParseBinary(R"({"inputs":[{"name":"a","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":8}}]})",
                  BytesElements({"abcd"}), limits);
  EXPECT_THAT(r.status().message(), HasSubstr("max_text_chars=3"));

  limits = RequestLimits{};
  limits.max_json_depth = 5;
  r = ParseInferRequest(
      R"({"inputs":[{"name":"a","shape":[1,1,1],"datatype":"INT64","data":[[[1]]]}]})",
      std::nullopt, limits);
  EXPECT_THAT(r.status().message(), HasSubstr("max_json_depth=5"));
}

TEST(RenderInferResponseTest, JsonForm) {
  InferResponse response;
  response.model_name = "bge";
  response.model_version = "1";
  response.id = "r1";
  response.outputs.push_back({"logits", DataType::kFp32, {2, 1}, std::vector<float>{0.5f, -0.1f}, {}});
  response.outputs.push_back({"flags", DataType::kBool, {2}, std::vector<uint8_t>{1, 0}, {}});
  absl::StatusOr<RenderedInferResponse> r = RenderInferResponse(response, InferRequest{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->inference_header_content_length.has_value());
  EXPECT_EQ(r->body,
            R"({"id":"r1","model_name":"bge","model_version":"1","outputs":[)"
            R"({"data":[0.5,-0.1],"datatype":"FP32","name":"logits","shape":[2,1]},)"
            R"({"data":[true,false],"datatype":"BOOL","name":"flags","shape":[2]}]})");
}

TEST(RenderInferResponseTest, BinaryLayoutBytes) {
  InferResponse response;
  response.model_name = "m";
  response.model_version = "1";
  response.outputs.push_back({"scores", DataType::kFp32, {2}, std::vector<float>{1.0f, -2.0f}, {}});
  response.outputs.push_back({"ids", DataType::kInt64, {1}, std::vector<int64_t>{258}, {}});
  response.outputs.push_back({"text", DataType::kBytes, {1}, std::vector<std::string>{"hi"}, {}});
  InferRequest request;
  request.binary_data_output = true;
  request.outputs.push_back({"ids", false, {}});  // this one stays JSON
  absl::StatusOr<RenderedInferResponse> r = RenderInferResponse(response, request);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->inference_header_content_length.has_value());
  const size_t n = *r->inference_header_content_length;
  const nlohmann::json header = nlohmann::json::parse(r->body.substr(0, n));
  EXPECT_EQ(header["outputs"][0]["parameters"]["binary_data_size"], 8);
  EXPECT_FALSE(header["outputs"][0].contains("data"));
  EXPECT_EQ(header["outputs"][1]["data"], nlohmann::json::array({258}));
  EXPECT_FALSE(header["outputs"][1].contains("parameters"));
  EXPECT_EQ(header["outputs"][2]["parameters"]["binary_data_size"], 6);
  const std::string expected_binary = std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8) +
                                      std::string("\x02\x00\x00\x00hi", 6);
  EXPECT_EQ(r->body.substr(n), expected_binary);
}

TEST(RenderInferResponseTest, RoundTripsThroughTheRequestParser) {
  // A binary response body is laid out exactly like a binary request body: feed it back.
  InferResponse response;
  response.outputs.push_back({"a", DataType::kInt32, {3}, std::vector<int32_t>{-1, 0, 70000}, {}});
  response.outputs.push_back({"b", DataType::kFp64, {1}, std::vector<double>{0.1}, {}});
  InferRequest request;
  request.binary_data_output = true;
  absl::StatusOr<RenderedInferResponse> r = RenderInferResponse(response, request);
  ASSERT_TRUE(r.ok());
  nlohmann::json header = nlohmann::json::parse(r->body.substr(0, *r->inference_header_content_length));
  header["inputs"] = header["outputs"];
  const std::string new_header = header.dump();
  absl::StatusOr<InferRequest> back =
      ParseBinary(new_header, r->body.substr(*r->inference_header_content_length));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(std::get<std::vector<int32_t>>(back->inputs[0].data), ElementsAre(-1, 0, 70000));
  EXPECT_THAT(std::get<std::vector<double>>(back->inputs[1].data), ElementsAre(0.1));
}

TEST(RenderInferResponseTest, InconsistentOutputsAreInternal) {
  InferResponse response;
  response.outputs.push_back({"a", DataType::kFp32, {3}, std::vector<float>{1.0f}, {}});
  EXPECT_EQ(RenderInferResponse(response, {}).status().code(), absl::StatusCode::kInternal);
  response.outputs[0] = {"a", DataType::kFp32, {1}, std::vector<int64_t>{1}, {}};
  EXPECT_EQ(RenderInferResponse(response, {}).status().code(), absl::StatusCode::kInternal);
}

TEST(ElementCountTest, OverflowIsCaughtAtEveryStep) {
  const std::vector<int64_t> shape = {int64_t{1} << 32, int64_t{1} << 32, 2};
  EXPECT_FALSE(ElementCount(shape, std::numeric_limits<size_t>::max(), "s").ok());
  const std::vector<int64_t> fine = {3, 4};
  EXPECT_EQ(*ElementCount(fine, 12, "s"), 12u);
  EXPECT_FALSE(ElementCount(fine, 11, "s").ok());
  EXPECT_EQ(*ElementCount({}, 1, "s"), 1u);  // a scalar
}

TEST(IsValidUtf8Test, Cases) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\x80"));              // stray continuation
}

TEST(ParseInferRequestTest, RowsOverMaxDocumentsAreRefusedOnTheShape) {
  RequestLimits limits;
  limits.max_documents = 3;
  // [4, 1]: the data does not even match; the shape alone is refused, naming the limit.
  absl::StatusOr<InferRequest> r = ParseInferRequest(
      R"({"inputs":[{"name":"input_ids","shape":[4,1],"datatype":"INT64","data":[1]}]})", std::nullopt, limits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("'inputs[0].shape' has 4 rows (batch dimension); the limit is max_documents=3"));
  r = ParseInferRequest(
      R"({"inputs":[{"name":"input_ids","shape":[3,2],"datatype":"INT64","data":[1,2,3,4,5,6]}]})", std::nullopt, limits);
  EXPECT_TRUE(r.ok()) << r.status();
  // A BYTES tensor holds one document per element, whatever its rank.
  r = ParseBinary(R"({"inputs":[{"name":"text","shape":[1,4],"datatype":"BYTES","parameters":{"binary_data_size":16}}]})",
                  BytesElements({"", "", "", ""}), limits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("BYTES tensor holds one document per element and has 4; the limit is max_documents=3"));
}

TEST(ParseInferRequestTest, MillionsOfTinyStringsAreRefusedBeforeTheDomIsBuilt) {
  // 2,000,000 one-byte strings in 8 MB: the pre-scan refuses it (a DOM of them costs ~650 MB).
  std::string body = R"({"inputs":[{"name":"text","shape":[2000000],"datatype":"BYTES","data":[)";
  for (int i = 0; i < 2000000; ++i) body += i == 0 ? "\"a\"" : ",\"a\"";
  body += "]}]}";
  absl::StatusOr<InferRequest> r = ParseInferRequest(body, std::nullopt);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("more than 5024 strings"));
  EXPECT_THAT(r.status().message(), HasSubstr("max_documents=1000"));
}

}  // namespace
}  // namespace tide::api
