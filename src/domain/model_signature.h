// tide::ModelSignature — the input and output names and types of a reranker model file.
//
// Contract: a plain value. The runtime reads it from the model (runtime::OrtBackend::ReadSignature),
// config normalises a config.pbtxt against it, serving and the routes report it. It lives in domain
// so that each of them can use it without depending on the others.
#pragma once

#include <cstdint>
#include <string>

namespace tide {

// What the backend found in the model file.
struct ModelSignature {
  std::string input_ids_name = "input_ids";
  std::string attention_mask_name = "attention_mask";
  std::string token_type_ids_name;  // empty: the model takes no token_type_ids
  std::string logits_name = "logits";
  // An embedder's per-token states [batch, sequence, hidden] (float, named "token_embeddings"):
  // TEI's /embed_all. Empty: the model has no such output.
  std::string token_embeddings_name;
  bool ids_are_int32 = false;       // model expects int32 token tensors (converted by the backend)
  int64_t num_labels = 1;           // last dim of the output; -1 when dynamic
};

}  // namespace tide
