// tide::runtime::testing::PackRows — a TokenBatch from rows of token ids for backend tests: rows of
// different lengths are padded with id 0 and mask 0 to the longest; token types (when asked for)
// are all 0. Test-only, header-only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/model_backend.h"

namespace tide::runtime::testing {

inline TokenBatch PackRows(const std::vector<std::vector<int64_t>>& rows, bool with_types = false) {
  size_t seq = 0;
  for (const auto& r : rows) seq = std::max(seq, r.size());
  TokenBatch b;
  b.Resize(static_cast<int64_t>(rows.size()), static_cast<int64_t>(seq), with_types);
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows[i].size(); ++j) {
      b.input_ids[i * seq + j] = rows[i][j];
      b.attention_mask[i * seq + j] = 1;
    }
  }
  return b;
}

}  // namespace tide::runtime::testing
