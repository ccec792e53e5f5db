// tide::api KServe v2 tensors: datatypes, typed element storage, and parameters, shared by the
// infer request/response and metadata formats (kserve_infer.h, kserve_metadata.h).
//
// Contract:
//  - Plain value types and pure functions; thread-safe; never throw.
//  - tide carries BOOL, INT32, INT64, FP32, FP64 and BYTES tensors. The other v2 datatype names
//    (UINT8..UINT64, INT8, INT16, FP16, BF16) are recognised so that errors can say "not
//    supported" rather than "unknown".
//  - A Tensor's `data` holds the vector type that matches `datatype` (see TensorData), row-major,
//    with exactly ElementCount(shape) elements once validated.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tide::api {

enum class DataType { kBool, kInt32, kInt64, kFp32, kFp64, kBytes };

// "BOOL", "INT32", "INT64", "FP32", "FP64", "BYTES".
std::string_view DataTypeName(DataType type);

// Parses a v2 datatype name. kFailedPrecondition naming `field` for a v2 type tide does not carry
// ("FP16 is not supported ...") or an unknown name.
absl::StatusOr<DataType> ParseDataType(std::string_view name, std::string_view field);

// Bytes per element in the binary tensor format; 0 for BYTES (variable: 4-byte length + bytes).
size_t DataTypeByteSize(DataType type);

// Element storage by datatype: BOOL -> std::vector<uint8_t> holding 0 or 1, INT32 -> int32_t,
// INT64 -> int64_t, FP32 -> float, FP64 -> double, BYTES -> std::string.
using TensorData = std::variant<std::vector<uint8_t>, std::vector<int32_t>, std::vector<int64_t>,
                                std::vector<float>, std::vector<double>, std::vector<std::string>>;

// An empty TensorData of the alternative that `type` uses.
TensorData EmptyTensorData(DataType type);
// Whether `data` holds the alternative that `type` uses.
bool DataMatchesType(const TensorData& data, DataType type);
size_t TensorDataSize(const TensorData& data);

// KServe parameter values: bool, int64, double or string.
using ParameterValue = std::variant<bool, int64_t, double, std::string>;
using Parameters = std::map<std::string, ParameterValue, std::less<>>;

struct Tensor {
  std::string name;
  DataType datatype = DataType::kFp32;
  std::vector<int64_t> shape;
  TensorData data;
  Parameters parameters;  // request inputs: as sent (binary_data_size included)
};

// Product of the dims, or kFailedPrecondition naming `field` for a negative dim or a product over
// `max_elements` (checked at every step, so it cannot overflow).
absl::StatusOr<size_t> ElementCount(std::span<const int64_t> shape, size_t max_elements,
                                    std::string_view field);

// Whether `bytes` is well-formed UTF-8 (no overlong forms, surrogates, or code points > U+10FFFF).
bool IsValidUtf8(std::string_view bytes);

}  // namespace tide::api
