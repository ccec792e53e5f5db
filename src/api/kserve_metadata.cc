#include "api/kserve_metadata.h"

#include <nlohmann/json.hpp>

#include "api/json_text.h"

namespace tide::api {
namespace {

using nlohmann::json;


json TensorsToJson(const std::vector<TensorMetadata>& tensors) {
  json out = json::array();
  for (const TensorMetadata& tensor : tensors) {
    out.push_back({{"name", tensor.name},
                   {"datatype", std::string(DataTypeName(tensor.datatype))},
                   {"shape", tensor.shape}});
  }
  return out;
}

}  // namespace

std::string RenderServerMetadata(const ServerMetadata& metadata) {
  json out = json::object();
  out["name"] = metadata.name;
  out["version"] = metadata.version;
  out["extensions"] = metadata.extensions;
  return JsonText(out);
}

std::string RenderModelMetadata(const ModelMetadata& metadata) {
  json out = json::object();
  out["name"] = metadata.name;
  out["versions"] = metadata.versions;
  out["platform"] = metadata.platform;
  out["inputs"] = TensorsToJson(metadata.inputs);
  out["outputs"] = TensorsToJson(metadata.outputs);
  return JsonText(out);
}

std::string RenderKServeError(const absl::Status& status) {
  json out = json::object();
  out["error"] = std::string(status.message());
  return JsonText(out);
}

}  // namespace tide::api
