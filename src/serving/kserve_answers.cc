#include "serving/kserve_answers.h"

#include <string>
#include <utility>

#include "config/model_config.h"

namespace tide::serving {

namespace {

api::DataType ToApi(DataType t) {
  switch (t) {
    case TYPE_BOOL: return api::DataType::kBool;
    case TYPE_INT32: return api::DataType::kInt32;
    case TYPE_INT64: return api::DataType::kInt64;
    case TYPE_FP64: return api::DataType::kFp64;
    case TYPE_STRING: return api::DataType::kBytes;
    default: return api::DataType::kFp32;
  }
}

}  // namespace

api::ModelMetadata ModelMetadataOf(const ModelManager& models, const ServedModel& m) {
  api::ModelMetadata md;
  md.name = m.name();
  for (int64_t v : models.Versions(m.name())) md.versions.push_back(std::to_string(v));
  md.platform = std::string(config::kOnnxRuntimePlatform);
  const bool batched = m.config().max_batch_size() > 0;
  auto add = [batched](const auto& tensor, std::vector<api::TensorMetadata>* out) {
    api::TensorMetadata t;
    t.name = tensor.name();
    t.datatype = ToApi(tensor.data_type());
    if (batched) t.shape.push_back(-1);
    for (int64_t d : tensor.dims()) t.shape.push_back(d);
    out->push_back(std::move(t));
  };
  for (const auto& in : m.config().input()) add(in, &md.inputs);
  for (const auto& out : m.config().output()) add(out, &md.outputs);
  md.inputs.push_back({"text", api::DataType::kBytes, {-1}});
  md.inputs.push_back({"text_pair", api::DataType::kBytes, {-1}});
  return md;
}

api::InferResponse InferResponseOf(const ServedModel& model, const api::InferRequest& request,
                                   InferenceResult result, bool degraded) {
  api::InferResponse response;
  response.model_name = model.name();
  response.model_version = std::to_string(model.version());
  response.id = request.id;
  if (degraded) response.parameters["degraded"] = true;
  api::Tensor out;
  out.name = model.signature().logits_name;
  out.datatype = api::DataType::kFp32;
  out.shape = {result.rows, result.num_labels};
  out.data = std::move(result.logits);
  response.outputs.push_back(std::move(out));
  return response;
}

}  // namespace tide::serving
