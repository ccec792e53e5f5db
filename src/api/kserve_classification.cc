#include "api/kserve_classification.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/json_reader.h"
#include "common/error.h"

namespace tide::api {

absl::StatusOr<std::optional<int64_t>> ClassificationCount(const Parameters& output_parameters,
                                                           std::string_view output_name) {
  auto it = output_parameters.find("classification");
  if (it == output_parameters.end()) return std::optional<int64_t>();
  const int64_t* k = std::get_if<int64_t>(&it->second);
  if (k == nullptr || *k < 1) {
    return errors::InvalidInput(absl::StrCat("outputs['", Sv(output_name),
                                             "'].parameters.classification must be an integer >= 1"));
  }
  return std::optional<int64_t>(*k);
}

absl::StatusOr<Tensor> ClassificationTensor(std::string_view name, std::span<const float> logits, int64_t rows,
                                            int64_t classes, int64_t k, std::span<const std::string> labels) {
  if (rows < 0 || classes < 1 || k < 1 || logits.size() != static_cast<size_t>(rows * classes)) {
    return errors::Internal(absl::StrCat("classification of ", logits.size(), " values as ", rows, " x ", classes));
  }
  k = std::min(k, classes);
  Tensor out;
  out.name = std::string(name);
  out.datatype = DataType::kBytes;
  out.shape = {rows, k};
  std::vector<std::string> data;
  data.reserve(static_cast<size_t>(rows * k));
  std::vector<int64_t> order(static_cast<size_t>(classes));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * classes;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [row](int64_t a, int64_t b) { return row[a] > row[b]; });
    for (int64_t j = 0; j < k; ++j) {
      std::string item = absl::StrCat(std::to_string(row[order[j]]), ":", order[j]);
      if (labels.size() == static_cast<size_t>(classes)) absl::StrAppend(&item, ":", labels[order[j]]);
      data.push_back(std::move(item));
    }
  }
  out.data = std::move(data);
  return out;
}

}  // namespace tide::api
