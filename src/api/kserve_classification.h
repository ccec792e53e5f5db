// tide::api KServe/Triton classification extension — an output requested with
// "parameters": {"classification": k} comes back as a BYTES tensor of shape [batch, k] holding
// each row's k largest values, highest first, as "value:index" strings, or "value:index:label"
// when the model names its labels (Triton's format; Triton reads the names from a label file,
// tide from a HuggingFace folder's id2label). k larger than the number of classes returns every
// class (as Triton clamps it).
//
// Contract: pure functions; thread-safe; never throw.
//  - ClassificationCount: the parameter of an output, nullopt when absent; kFailedPrecondition
//    (422) for a value that is not an integer >= 1.
//  - ClassificationTensor: kInternal when logits.size() != rows x classes. `labels` is used only
//    when it has one name per class.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "api/kserve_tensor.h"

namespace tide::api {

absl::StatusOr<std::optional<int64_t>> ClassificationCount(const Parameters& output_parameters,
                                                           std::string_view output_name);

absl::StatusOr<Tensor> ClassificationTensor(std::string_view name, std::span<const float> logits, int64_t rows,
                                            int64_t classes, int64_t k, std::span<const std::string> labels = {});

}  // namespace tide::api
