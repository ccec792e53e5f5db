#include "api/tei_info.h"

#include "nlohmann/json.hpp"

namespace tide::api {

std::string RenderTeiInfo(const TeiInfo& info) {
  using nlohmann::json;
  json id2label = json::object();
  json label2id = json::object();
  for (size_t i = 0; i < info.labels.size(); ++i) {
    id2label[std::to_string(i)] = info.labels[i];
    label2id[info.labels[i]] = i;
  }
  json out = json::object();
  out["model_id"] = info.model_id;
  out["model_sha"] = nullptr;
  out["model_dtype"] = info.model_dtype;
  if (info.embedding_pooling.has_value()) {
    out["model_type"] = {{"embedding", {{"pooling", *info.embedding_pooling}}}};
  } else {
    out["model_type"] = {{info.classifier ? "classifier" : "reranker", {{"id2label", id2label}, {"label2id", label2id}}}};
  }
  out["max_concurrent_requests"] = info.max_concurrent_requests;
  out["max_input_length"] = info.max_input_length;
  out["max_batch_tokens"] = info.max_batch_tokens;
  out["max_batch_requests"] = info.max_batch_requests.has_value() ? json(*info.max_batch_requests) : json(nullptr);
  out["max_client_batch_size"] = info.max_client_batch_size;
  out["auto_truncate"] = info.auto_truncate;
  out["tokenization_workers"] = info.tokenization_workers;
  out["version"] = info.version;
  out["sha"] = nullptr;
  out["docker_label"] = nullptr;
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace tide::api
