// tide::ModelSignature — the input and output names and types of a reranker model file.
//
// Contract: a plain value. The runtime reads it from the model (runtime::OrtBackend::ReadSignature),
// config normalises a config.pbtxt against it, serving and the routes report it. It lives in domain
// so that each of them can use it without depending on the others.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tide {

// A decoder's shared prompt prefix (optimize/prompt_prefix.h writes these into a graph,
// runtime::OrtBackend feeds and reads them): attention layer n takes the prefix's keys and values
// as inputs kPromptPrefixKeyInput + n and kPromptPrefixValueInput + n ([1, prefix_length, width]
// float, width = kv heads x head size) and gives a batch's own keys and values, post-rotary, as
// outputs kPromptPrefixKeyOutput + n and kPromptPrefixValueOutput + n ([batch, sequence, width]).
inline constexpr char kPromptPrefixKeyInput[] = "tide_prefix_key.";
inline constexpr char kPromptPrefixValueInput[] = "tide_prefix_value.";
inline constexpr char kPromptPrefixKeyOutput[] = "tide_present_key.";
inline constexpr char kPromptPrefixValueOutput[] = "tide_present_value.";
inline constexpr char kPromptPrefixInputStem[] = "tide_prefix_";
inline constexpr char kPromptPrefixOutputStem[] = "tide_present_";

// What the backend found in the model file.
struct ModelSignature {
  std::string input_ids_name = "input_ids";
  std::string attention_mask_name = "attention_mask";
  std::string token_type_ids_name;  // empty: the model takes no token_type_ids
  std::string logits_name = "logits";
  // An embedder's per-token states [batch, sequence, hidden] (float, named "token_embeddings"):
  // TEI's /embed_all. Empty: the model has no such output.
  std::string token_embeddings_name;
  // A decoder graph with shared prompt prefix inputs (kPromptPrefixKeyInput above): one slot per
  // input, in the model's input order, with the output that gives a batch's own values for it.
  struct PromptPrefixSlot {
    std::string input, output;
    int64_t width = 0;
  };
  std::vector<PromptPrefixSlot> prompt_prefix;
  bool ids_are_int32 = false;       // model expects int32 token tensors (converted by the backend)
  int64_t num_labels = 1;           // last dim of the output; -1 when dynamic
};

}  // namespace tide
