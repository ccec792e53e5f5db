#include "api/kserve_tensor.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/json_reader.h"
#include "common/error.h"

namespace tide::api {

std::string_view DataTypeName(DataType type) {
  switch (type) {
    case DataType::kBool:
      return "BOOL";
    case DataType::kInt32:
      return "INT32";
    case DataType::kInt64:
      return "INT64";
    case DataType::kFp32:
      return "FP32";
    case DataType::kFp64:
      return "FP64";
    case DataType::kBytes:
      return "BYTES";
  }
  return "BYTES";
}

absl::StatusOr<DataType> ParseDataType(std::string_view name, std::string_view field) {
  static constexpr std::array<std::pair<std::string_view, DataType>, 6> kCarried = {{
      {"BOOL", DataType::kBool},
      {"INT32", DataType::kInt32},
      {"INT64", DataType::kInt64},
      {"FP32", DataType::kFp32},
      {"FP64", DataType::kFp64},
      {"BYTES", DataType::kBytes},
  }};
  for (const auto& [carried_name, type] : kCarried) {
    if (name == carried_name) return type;
  }
  static constexpr std::array<std::string_view, 8> kOtherV2 = {
      "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "FP16", "BF16"};
  for (const std::string_view other : kOtherV2) {
    if (name == other) {
      return errors::InvalidInput(
          absl::StrCat("field '", Sv(field), "': datatype ", Sv(name),
                       " is not supported by tide; supported: BOOL, INT32, INT64, FP32, FP64, "
                       "BYTES"));
    }
  }
  return errors::InvalidInput(absl::StrCat(
      "field '", Sv(field), "': unknown datatype \"", Sv(name.substr(0, 32)),
      "\"; supported: BOOL, INT32, INT64, FP32, FP64, BYTES"));
}

size_t DataTypeByteSize(DataType type) {
  switch (type) {
    case DataType::kBool:
      return 1;
    case DataType::kInt32:
    case DataType::kFp32:
      return 4;
    case DataType::kInt64:
    case DataType::kFp64:
      return 8;
    case DataType::kBytes:
      return 0;
  }
  return 0;
}

TensorData EmptyTensorData(DataType type) {
  switch (type) {
    case DataType::kBool:
      return std::vector<uint8_t>();
    case DataType::kInt32:
      return std::vector<int32_t>();
    case DataType::kInt64:
      return std::vector<int64_t>();
    case DataType::kFp32:
      return std::vector<float>();
    case DataType::kFp64:
      return std::vector<double>();
    case DataType::kBytes:
      return std::vector<std::string>();
  }
  return std::vector<std::string>();
}

bool DataMatchesType(const TensorData& data, DataType type) {
  return data.index() == EmptyTensorData(type).index();
}

size_t TensorDataSize(const TensorData& data) {
  return std::visit([](const auto& v) { return v.size(); }, data);
}

absl::StatusOr<size_t> ElementCount(std::span<const int64_t> shape, size_t max_elements,
                                    std::string_view field) {
  size_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return errors::InvalidInput(absl::StrCat("field '", Sv(field), "': dimension ", i,
                                                        " is negative (", shape[i], ")"));
    }
  }
  // A zero dim makes the product 0 whatever the others are; check it first so [0, 2^62, 2^62]
  // is an empty tensor rather than an overflow.
  for (const int64_t dim : shape) {
    if (dim == 0) return size_t{0};
  }
  for (const int64_t dim : shape) {
    const auto d = static_cast<uint64_t>(dim);
    if (d > max_elements || count > max_elements / d) {
      return errors::InvalidInput(absl::StrCat(
          "field '", Sv(field), "': the shape has more elements than the limit max_batch_tensor_elements=",
          max_elements));
    }
    count *= static_cast<size_t>(d);
  }
  return count;
}

bool IsValidUtf8(std::string_view bytes) {
  size_t i = 0;
  const size_t n = bytes.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t length;
    uint32_t code;
    uint32_t min;
    if ((c & 0xE0) == 0xC0) {
      length = 2, code = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3, code = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4, code = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (n - i < length) return false;
    for (size_t k = 1; k < length; ++k) {
      const auto cc = static_cast<unsigned char>(bytes[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      code = (code << 6) | (cc & 0x3F);
    }
    if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += length;
  }
  return true;
}

}  // namespace tide::api
