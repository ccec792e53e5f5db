#include "api/kserve_metadata.h"

#include <gtest/gtest.h>

namespace tide::api {
namespace {

TEST(KServeMetadataTest, Server) {
  EXPECT_EQ(RenderServerMetadata({"tide", "0.1.0", {"binary_tensor_data"}}),
            R"({"extensions":["binary_tensor_data"],"name":"tide","version":"0.1.0"})");
}

TEST(KServeMetadataTest, Model) {
  ModelMetadata m;
  m.name = "bge";
  m.versions = {"1"};
  m.platform = "onnxruntime_onnx";
  m.inputs = {{"input_ids", DataType::kInt64, {-1, -1}}};
  m.outputs = {{"logits", DataType::kFp32, {-1, 1}}};
  EXPECT_EQ(RenderModelMetadata(m),
            R"({"inputs":[{"datatype":"INT64","name":"input_ids","shape":[-1,-1]}],"name":"bge",)"
            R"("outputs":[{"datatype":"FP32","name":"logits","shape":[-1,1]}],)"
            R"("platform":"onnxruntime_onnx","versions":["1"]})");
}

TEST(KServeMetadataTest, Error) {
  EXPECT_EQ(RenderKServeError(absl::NotFoundError("model \"x\" is not loaded")),
            R"({"error":"model \"x\" is not loaded"})");
}

}  // namespace
}  // namespace tide::api
