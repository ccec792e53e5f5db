// tide::api TEI info wire format — `GET /info`, in the shape of text-embeddings-inference's Info.
//
// Response: {"model_id": str, "model_sha": null, "model_dtype": str,
//            "model_type": {"reranker" | "classifier": {"id2label": {"0": str, ...},
//                                                       "label2id": {str: 0, ...}}}
//                          | {"embedding": {"pooling": "cls" | "mean" | "last_token"}},
//            "max_concurrent_requests": n, "max_input_length": n, "max_batch_tokens": n,
//            "max_batch_requests": n | null, "max_client_batch_size": n, "auto_truncate": bool,
//            "tokenization_workers": n, "version": str, "sha": null, "docker_label": null}
//
// Contract: a pure renderer producing compact JSON; thread-safe; never fails.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tide::api {

struct TeiInfo {
  std::string model_id;
  std::string model_dtype = "float32";
  bool classifier = false;          // model_type "classifier" (else "reranker")
  std::vector<std::string> labels;  // id2label in id order
  std::optional<std::string> embedding_pooling;  // set: model_type "embedding" with this pooling
  int64_t max_concurrent_requests = 0;
  int64_t max_input_length = 0;
  int64_t max_batch_tokens = 0;
  std::optional<int64_t> max_batch_requests;
  int64_t max_client_batch_size = 0;
  bool auto_truncate = true;
  int64_t tokenization_workers = 0;
  std::string version;
};

std::string RenderTeiInfo(const TeiInfo& info);

}  // namespace tide::api
