// tide::runtime::PromptPrefix — the keys and values of a decoder prompt's shared first tokens,
// computed once and fed to every batch whose rows all start with those tokens.
//
// Contract:
//  - A plain immutable value, shared (std::shared_ptr<const PromptPrefix>) by every instance of a
//    model version (runtime::OrtOptions::prompt_prefix); thread-safe to read.
//  - ids: the P tokens; values[j]: [1, P, width] float for the model's prompt prefix slot j
//    (ModelSignature::prompt_prefix, domain/model_signature.h), in the slot's order.
//  - shorter: a prefix of fewer tokens tried for a batch this one does not start (the prompt's
//    first tokens without the default instruction: a request with its own instruction); null:
//    none. Used() picks the first of the chain that starts every row.
//  - Made by OrtBackend::ComputePromptPrefix from a model with prefix inputs
//    (optimize/prompt_prefix.h); the backend uses it for a batch only when every row's real tokens
//    start with `ids` and go on past them (StartsEveryRow), and then gives ONNX Runtime the rows'
//    tokens after them. Exact: attention is causal, so a row's first P keys and values are those of
//    the P tokens alone.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/model_backend.h"

namespace tide::runtime {

struct PromptPrefix {
  std::vector<int64_t> ids;
  std::vector<std::vector<float>> values;
  std::shared_ptr<const PromptPrefix> shorter;

  int64_t length() const { return static_cast<int64_t>(ids.size()); }

  // Whether every row of `batch` (right-padded) starts with `ids`, all of them real tokens, and has
  // a real token after them. False for an empty prefix.
  bool StartsEveryRow(const TokenBatch& batch) const {
    const int64_t p = length();
    if (p == 0 || batch.seq_len <= p) return false;
    for (int64_t r = 0; r < batch.batch; ++r) {
      const int64_t* row = batch.input_ids.data() + r * batch.seq_len;
      const int64_t* mask = batch.attention_mask.data() + r * batch.seq_len;
      for (int64_t i = 0; i < p; ++i) {
        if (row[i] != ids[static_cast<size_t>(i)] || mask[i] == 0) return false;
      }
      if (mask[p] == 0) return false;
    }
    return true;
  }

  // This prefix, else the first shorter one, that starts every row of `batch`; null: none.
  const PromptPrefix* Used(const TokenBatch& batch) const {
    for (const PromptPrefix* p = this; p != nullptr; p = p->shorter.get()) {
      if (p->StartsEveryRow(batch)) return p;
    }
    return nullptr;
  }
};

}  // namespace tide::runtime
