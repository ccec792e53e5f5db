#include "api/kserve_infer.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/json_reader.h"
#include "common/error_echo.h"
#include "common/error.h"
#include "common/status_macros.h"

namespace tide::api {
namespace {

using nlohmann::json;

absl::StatusOr<size_t> ParseHeaderLength(std::string_view raw, size_t body_size) {
  const std::string_view value = [](std::string_view v) { while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1); while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1); return v; }(raw);
  if (value.empty() || value.size() > 19) {
    return errors::MalformedRequest(absl::StrCat(Sv(kInferenceHeaderContentLength),
                                                   " must be a byte count; got \"",
                                                   Sv(value.substr(0, 32)), "\""));
  }
  size_t length = 0;
  for (const char c : value) {
    if (c < '0' || c > '9') {
      return errors::MalformedRequest(absl::StrCat(Sv(kInferenceHeaderContentLength),
                                                     " must be a byte count; got \"",
                                                     Sv(value.substr(0, 32)), "\""));
    }
    length = length * 10 + static_cast<size_t>(c - '0');
  }
  if (length > body_size) {
    return errors::MalformedRequest(absl::StrCat(Sv(kInferenceHeaderContentLength), " is ", length,
                                                   " but the body has only ", body_size,
                                                   " bytes"));
  }
  return length;
}

absl::StatusOr<Parameters> ParseParameters(const json& object, const std::string& path) {
  Parameters parameters;
  for (auto it = object.begin(); it != object.end(); ++it) {
    const json& value = it.value();
    const std::string field = absl::StrCat(path, ".", it.key());
    if (value.is_boolean()) {
      parameters.emplace(it.key(), value.get<bool>());
    } else if (value.is_number_unsigned()) {
      const uint64_t u = value.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return errors::InvalidInput(
            absl::StrCat("field '", field, "' is out of the int64 range"));
      }
      parameters.emplace(it.key(), static_cast<int64_t>(u));
    } else if (value.is_number_integer()) {
      parameters.emplace(it.key(), value.get<int64_t>());
    } else if (value.is_number_float()) {
      parameters.emplace(it.key(), value.get<double>());
    } else if (value.is_string()) {
      parameters.emplace(it.key(), value.get<std::string>());
    } else {
      return WrongType(field, "a boolean, number or string", value);
    }
  }
  return parameters;
}

absl::StatusOr<Parameters> ReadParameters(const ObjectReader& reader) {
  absl::StatusOr<const json*> object = reader.Object("parameters", false);
  if (!object.ok()) return object.status();
  if (*object == nullptr) return Parameters();
  return ParseParameters(**object, reader.Path("parameters"));
}

// Counts scalar leaves of a (possibly nested) data array, stopping once past `limit`.
void CountLeaves(const json& node, size_t limit, size_t* count) {
  for (const json& element : node) {
    if (*count > limit) return;
    if (element.is_array()) {
      CountLeaves(element, limit, count);
    } else {
      ++*count;
    }
  }
}

template <typename T>
bool ToInteger(const json& value, T* out) {
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
    *out = static_cast<T>(u);
    return true;
  }
  if (value.is_number_integer()) {
    const int64_t s = value.get<int64_t>();
    if (s < std::numeric_limits<T>::min() || s > std::numeric_limits<T>::max()) return false;
    *out = static_cast<T>(s);
    return true;
  }
  return false;
}

class JsonDataReader {
 public:
  JsonDataReader(std::string path, const RequestLimits& limits)
      : path_(std::move(path)), limits_(limits) {}

  template <typename T>
  absl::Status Flatten(const json& node, std::vector<T>* out) {
    for (const json& element : node) {
      if (element.is_array()) {
        TIDE_RETURN_IF_ERROR(Flatten(element, out));
        continue;
      }
      T value{};
      TIDE_RETURN_IF_ERROR(Convert(element, &value));
      out->push_back(std::move(value));
      ++index_;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Bad(std::string_view expected, const json& got) const {
    return errors::InvalidInput(absl::StrCat("field '", path_, "' element ", index_,
                                                      " must be ", Sv(expected), "; got ",
                                                      Sv(JsonTypeName(got))));
  }
  absl::Status Convert(const json& v, uint8_t* out) {
    if (!v.is_boolean()) return Bad("a boolean (BOOL)", v);
    *out = v.get<bool>() ? 1 : 0;
    return absl::OkStatus();
  }
  absl::Status Convert(const json& v, int32_t* out) {
    return ToInteger(v, out) ? absl::OkStatus() : Bad("an integer in the INT32 range", v);
  }
  absl::Status Convert(const json& v, int64_t* out) {
    return ToInteger(v, out) ? absl::OkStatus() : Bad("an integer in the INT64 range", v);
  }
  absl::Status Convert(const json& v, float* out) {
    if (!v.is_number()) return Bad("a number (FP32)", v);
    const double d = v.get<double>();
    if (std::isfinite(d) && std::fabs(d) > FLT_MAX) return Bad("a number in the FP32 range", v);
    *out = static_cast<float>(d);
    return absl::OkStatus();
  }
  absl::Status Convert(const json& v, double* out) {
    if (!v.is_number()) return Bad("a number (FP64)", v);
    *out = v.get<double>();
    return absl::OkStatus();
  }
  absl::Status Convert(const json& v, std::string* out) {
    if (!v.is_string()) return Bad("a string (BYTES)", v);
    const auto& s = v.get_ref<const std::string&>();
    if (s.size() > limits_.max_text_chars) {
      return errors::InvalidInput(absl::StrCat("field '", path_, "' element ", index_,
                                                        " has ", s.size(),
                                                        " bytes; the limit is max_text_chars=",
                                                        limits_.max_text_chars));
    }
    *out = s;
    return absl::OkStatus();
  }

  std::string path_;
  const RequestLimits& limits_;
  size_t index_ = 0;
};

uint64_t LoadLittleEndian(const char* p, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return v;
}

void StoreLittleEndian(uint64_t v, size_t bytes, std::string* out) {
  for (size_t i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

}  // namespace

absl::Status DecodeBinaryTensor(std::string_view bytes, size_t count, const std::string& path,
                          const RequestLimits& limits, Tensor* tensor) {
  const DataType type = tensor->datatype;
  if (type == DataType::kBytes) {
    // Every element needs at least its 4-byte length prefix.
    if (count > bytes.size() / 4) {
      return errors::InvalidInput(absl::StrCat(
          "field '", path, "': binary_data_size ", bytes.size(), " is too small for ", count,
          " BYTES elements"));
    }
    std::vector<std::string> strings;
    strings.reserve(count);
    size_t offset = 0;
    for (size_t i = 0; i < count; ++i) {
      if (bytes.size() - offset < 4) {
        return errors::InvalidInput(absl::StrCat(
            "field '", path, "': binary data ends inside the length of BYTES element ", i));
      }
      const uint64_t length = LoadLittleEndian(bytes.data() + offset, 4);
      offset += 4;
      if (length > bytes.size() - offset) {
        return errors::InvalidInput(absl::StrCat("field '", path, "': BYTES element ", i,
                                                          " claims ", length, " bytes but only ",
                                                          bytes.size() - offset, " remain"));
      }
      if (length > limits.max_text_chars) {
        return errors::InvalidInput(absl::StrCat(
            "field '", path, "': BYTES element ", i, " has ", length,
            " bytes; the limit is max_text_chars=", limits.max_text_chars));
      }
      std::string_view element = bytes.substr(offset, length);
      if (!IsValidUtf8(element)) {
        return errors::InvalidInput(
            absl::StrCat("field '", path, "': BYTES element ", i, " is not valid UTF-8"));
      }
      strings.emplace_back(element);
      offset += length;
    }
    if (offset != bytes.size()) {
      return errors::InvalidInput(absl::StrCat(
          "field '", path, "': binary_data_size is ", bytes.size(), " but the ", count,
          " BYTES elements use ", offset));
    }
    tensor->data = std::move(strings);
    return absl::OkStatus();
  }

  const size_t width = DataTypeByteSize(type);
  if (bytes.size() / width != count || bytes.size() % width != 0) {
    return errors::InvalidInput(absl::StrCat(
        "field '", path, "': binary_data_size is ", bytes.size(), " but shape and datatype ",
        Sv(DataTypeName(type)), " need ", count, " x ", width, " bytes"));
  }
  const char* p = bytes.data();
  switch (type) {
    case DataType::kBool: {
      std::vector<uint8_t> v(count);
      for (size_t i = 0; i < count; ++i) {
        const auto b = static_cast<unsigned char>(p[i]);
        if (b > 1) {
          return errors::InvalidInput(absl::StrCat(
              "field '", path, "': BOOL element ", i, " is byte ", int{b}, "; must be 0 or 1"));
        }
        v[i] = b;
      }
      tensor->data = std::move(v);
      break;
    }
    case DataType::kInt32: {
      std::vector<int32_t> v(count);
      for (size_t i = 0; i < count; ++i) {
        v[i] = static_cast<int32_t>(static_cast<uint32_t>(LoadLittleEndian(p + 4 * i, 4)));
      }
      tensor->data = std::move(v);
      break;
    }
    case DataType::kInt64: {
      std::vector<int64_t> v(count);
      for (size_t i = 0; i < count; ++i) {
        v[i] = static_cast<int64_t>(LoadLittleEndian(p + 8 * i, 8));
      }
      tensor->data = std::move(v);
      break;
    }
    case DataType::kFp32: {
      std::vector<float> v(count);
      for (size_t i = 0; i < count; ++i) {
        const auto bits = static_cast<uint32_t>(LoadLittleEndian(p + 4 * i, 4));
        std::memcpy(&v[i], &bits, 4);
      }
      tensor->data = std::move(v);
      break;
    }
    case DataType::kFp64: {
      std::vector<double> v(count);
      for (size_t i = 0; i < count; ++i) {
        const uint64_t bits = LoadLittleEndian(p + 8 * i, 8);
        std::memcpy(&v[i], &bits, 8);
      }
      tensor->data = std::move(v);
      break;
    }
    case DataType::kBytes:
      break;
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> CheckTensorShape(const Tensor& tensor, std::string_view shape_path,
                                        const RequestLimits& limits) {
  // Rows before elements, both on the shape alone: nothing of the data is converted yet.
  if (!tensor.shape.empty() && tensor.shape[0] > 0 &&
      static_cast<uint64_t>(tensor.shape[0]) > limits.max_documents) {
    return errors::InvalidInput(absl::StrCat(
        "field '", Sv(shape_path), "' has ", tensor.shape[0],
        " rows (batch dimension); the limit is max_documents=", limits.max_documents));
  }
  absl::StatusOr<size_t> count = ElementCount(tensor.shape, limits.max_batch_tensor_elements, shape_path);
  if (!count.ok()) return count.status();
  if (tensor.datatype == DataType::kBytes && *count > limits.max_documents) {
    return errors::InvalidInput(absl::StrCat(
        "field '", Sv(shape_path), "': a BYTES tensor holds one document per element and has ",
        *count, "; the limit is max_documents=", limits.max_documents));
  }
  return count;
}

namespace {

absl::StatusOr<std::vector<int64_t>> ReadShape(const ObjectReader& reader) {
  absl::StatusOr<const json*> shape = reader.Array("shape", true);
  if (!shape.ok()) return shape.status();
  // Rank is bounded by the body size; no model has more than a handful of dims.
  constexpr size_t kMaxRank = 16;
  if ((*shape)->size() > kMaxRank) {
    return errors::InvalidInput(absl::StrCat("field '", reader.Path("shape"), "' has ",
                                                      (*shape)->size(), " dims; at most ",
                                                      kMaxRank, " are supported"));
  }
  std::vector<int64_t> dims;
  dims.reserve((*shape)->size());
  for (size_t i = 0; i < (*shape)->size(); ++i) {
    const json& dim = (**shape)[i];
    int64_t value;
    if (!ToInteger(dim, &value)) {
      return WrongType(absl::StrCat(reader.Path("shape"), "[", i, "]"), "an integer", dim);
    }
    dims.push_back(value);
  }
  return dims;
}

absl::Status ParseInput(const json& element, const std::string& path, const RequestLimits& limits,
                        std::string_view binary, size_t* binary_offset, bool has_binary_section,
                        Tensor* tensor) {
  if (!element.is_object()) return WrongType(path, "an object", element);
  const ObjectReader reader(element, path);
  if (absl::Status s = reader.String("name", true, limits.max_text_chars, &tensor->name); !s.ok()) {
    return s;
  }
  if (tensor->name.empty()) {
    return errors::InvalidInput(
        absl::StrCat("field '", reader.Path("name"), "' must not be empty"));
  }
  std::string datatype;
  if (absl::Status s = reader.String("datatype", true, limits.max_text_chars, &datatype);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<DataType> type = ParseDataType(datatype, reader.Path("datatype"));
  if (!type.ok()) return type.status();
  tensor->datatype = *type;

  absl::StatusOr<std::vector<int64_t>> shape = ReadShape(reader);
  if (!shape.ok()) return shape.status();
  tensor->shape = *std::move(shape);
  absl::StatusOr<size_t> count = CheckTensorShape(*tensor, reader.Path("shape"), limits);
  if (!count.ok()) return count.status();

  absl::StatusOr<Parameters> parameters = ReadParameters(reader);
  if (!parameters.ok()) return parameters.status();
  tensor->parameters = *std::move(parameters);

  const nlohmann::json* data = reader.Find("data");
  auto binary_size = tensor->parameters.find("binary_data_size");
  if (binary_size != tensor->parameters.end()) {
    const std::string size_path = absl::StrCat(reader.Path("parameters"), ".binary_data_size");
    const auto* size = std::get_if<int64_t>(&binary_size->second);
    if (size == nullptr || *size < 0) {
      return errors::InvalidInput(
          absl::StrCat("field '", size_path, "' must be a non-negative integer"));
    }
    if (data != nullptr) {
      return errors::InvalidInput(absl::StrCat(
          "field '", path, "' has both 'data' and parameters.binary_data_size; send one"));
    }
    if (!has_binary_section) {
      return errors::InvalidInput(
          absl::StrCat("field '", size_path, "' needs the ", Sv(kInferenceHeaderContentLength),
                       " header that marks where the binary data starts"));
    }
    const auto bytes = static_cast<uint64_t>(*size);
    if (bytes > binary.size() - *binary_offset) {
      return errors::InvalidInput(absl::StrCat(
          "field '", size_path, "' is ", bytes, " but only ", binary.size() - *binary_offset,
          " bytes of binary data remain"));
    }
    const std::string_view section = binary.substr(*binary_offset, bytes);
    *binary_offset += bytes;
    return DecodeBinaryTensor(section, *count, path, limits, tensor);
  }

  if (data == nullptr) return MissingField(reader.Path("data"));
  if (!data->is_array()) return WrongType(reader.Path("data"), "an array", *data);
  size_t leaves = 0;
  CountLeaves(*data, *count, &leaves);
  if (leaves != *count) {
    return errors::InvalidInput(absl::StrCat(
        "field '", reader.Path("data"), "' has ",
        leaves > *count ? absl::StrCat("more than ", *count) : absl::StrCat(leaves),
        " elements but shape [", absl::StrJoin(tensor->shape, ","), "] needs ", *count));
  }
  JsonDataReader converter(reader.Path("data"), limits);
  tensor->data = EmptyTensorData(tensor->datatype);
  return std::visit(
      [&](auto& values) {
        values.reserve(*count);
        return converter.Flatten(*data, &values);
      },
      tensor->data);
}

}  // namespace

absl::StatusOr<InferRequest> ParseInferRequest(
    std::string_view body, std::optional<std::string_view> inference_header_content_length,
    const RequestLimits& limits) {
  std::string_view json_part = body;
  std::string_view binary;
  const bool has_binary_section = inference_header_content_length.has_value();
  if (has_binary_section) {
    absl::StatusOr<size_t> length = ParseHeaderLength(*inference_header_content_length, body.size());
    if (!length.ok()) return length.status();
    json_part = body.substr(0, *length);
    binary = body.substr(*length);
  }
  absl::StatusOr<json> parsed = ParseJsonObject(json_part, limits);
  if (!parsed.ok()) return parsed.status();
  const ObjectReader reader(*parsed, "");
  InferRequest request;

  if (absl::Status s = reader.String("id", false, limits.max_text_chars, &request.id); !s.ok()) {
    return s;
  }
  absl::StatusOr<Parameters> parameters = ReadParameters(reader);
  if (!parameters.ok()) return parameters.status();
  request.parameters = *std::move(parameters);
  if (auto it = request.parameters.find("binary_data_output"); it != request.parameters.end()) {
    const bool* value = std::get_if<bool>(&it->second);
    if (value == nullptr) {
      return errors::InvalidInput(
          "field 'parameters.binary_data_output' must be a boolean");
    }
    request.binary_data_output = *value;
  }

  absl::StatusOr<const json*> inputs = reader.Array("inputs", true);
  if (!inputs.ok()) return inputs.status();
  if ((*inputs)->empty()) return errors::InvalidInput("field 'inputs' must not be empty");
  request.inputs.resize((*inputs)->size());
  size_t binary_offset = 0;
  std::set<std::string_view> names;
  for (size_t i = 0; i < (*inputs)->size(); ++i) {
    const std::string path = absl::StrCat("inputs[", i, "]");
    if (absl::Status s = ParseInput((**inputs)[i], path, limits, binary, &binary_offset,
                                    has_binary_section, &request.inputs[i]);
        !s.ok()) {
      return s;
    }
    if (!names.insert(request.inputs[i].name).second) {
      return errors::InvalidInput(absl::StrCat("field '", path, ".name': input \"",
                                                        EchoForError(request.inputs[i].name),
                                                        "\" is given more than once"));
    }
  }
  if (binary_offset != binary.size()) {
    return errors::InvalidInput(absl::StrCat(
        "the body has ", binary.size(), " bytes after the JSON but the inputs' binary_data_size "
        "add up to ", binary_offset));
  }

  absl::StatusOr<const json*> outputs = reader.Array("outputs", false);
  if (!outputs.ok()) return outputs.status();
  if (*outputs != nullptr) {
    request.outputs.resize((*outputs)->size());
    for (size_t i = 0; i < (*outputs)->size(); ++i) {
      const std::string path = absl::StrCat("outputs[", i, "]");
      const json& element = (**outputs)[i];
      if (!element.is_object()) return WrongType(path, "an object", element);
      const ObjectReader output_reader(element, path);
      InferRequestedOutput& output = request.outputs[i];
      if (absl::Status s = output_reader.String("name", true, limits.max_text_chars, &output.name);
          !s.ok()) {
        return s;
      }
      absl::StatusOr<Parameters> output_parameters = ReadParameters(output_reader);
      if (!output_parameters.ok()) return output_parameters.status();
      output.parameters = *std::move(output_parameters);
      if (auto it = output.parameters.find("binary_data"); it != output.parameters.end()) {
        const bool* value = std::get_if<bool>(&it->second);
        if (value == nullptr) {
          return errors::InvalidInput(
              absl::StrCat("field '", path, ".parameters.binary_data' must be a boolean"));
        }
        output.binary_data = *value;
      }
    }
  }
  return request;
}

bool OutputWantsBinary(const InferRequest& request, std::string_view name) {
  for (const InferRequestedOutput& output : request.outputs) {
    if (output.name == name && output.binary_data.has_value()) return *output.binary_data;
  }
  return request.binary_data_output;
}

namespace {

json ParameterToJson(const ParameterValue& value) {
  return std::visit([](const auto& v) { return json(v); }, value);
}

json ParametersToJson(const Parameters& parameters) {
  json out = json::object();
  for (const auto& [key, value] : parameters) out[key] = ParameterToJson(value);
  return out;
}

}  // namespace

void EncodeBinaryTensor(const TensorData& data, std::string* out) {
  std::visit(
      [out](const auto& values) {
        using T = typename std::decay_t<decltype(values)>::value_type;
        for (const T& v : values) {
          if constexpr (std::is_same_v<T, std::string>) {
            StoreLittleEndian(v.size(), 4, out);
            out->append(v);
          } else if constexpr (std::is_same_v<T, float>) {
            uint32_t bits;
            std::memcpy(&bits, &v, 4);
            StoreLittleEndian(bits, 4, out);
          } else if constexpr (std::is_same_v<T, double>) {
            uint64_t bits;
            std::memcpy(&bits, &v, 8);
            StoreLittleEndian(bits, 8, out);
          } else {
            StoreLittleEndian(static_cast<uint64_t>(v), sizeof(T), out);
          }
        }
      },
      data);
}

namespace {

json DataToJson(const TensorData& data) {
  return std::visit(
      [](const auto& values) {
        using T = typename std::decay_t<decltype(values)>::value_type;
        json array = json::array();
        for (const T& v : values) {
          if constexpr (std::is_same_v<T, uint8_t>) {
            array.push_back(v != 0);
          } else if constexpr (std::is_same_v<T, float>) {
            array.push_back(FloatForJson(v));
          } else {
            array.push_back(v);
          }
        }
        return array;
      },
      data);
}

}  // namespace

absl::StatusOr<RenderedInferResponse> RenderInferResponse(const InferResponse& response,
                                                          const InferRequest& request) {
  json out = json::object();
  out["model_name"] = response.model_name;
  out["model_version"] = response.model_version;
  if (!response.id.empty()) out["id"] = response.id;  // Triton leaves it out when the request had none
  if (!response.parameters.empty()) out["parameters"] = ParametersToJson(response.parameters);
  json outputs = json::array();
  std::string binary;
  bool any_binary = false;
  for (const Tensor& tensor : response.outputs) {
    if (!DataMatchesType(tensor.data, tensor.datatype)) {
      return errors::Internal(absl::StrCat("output \"", tensor.name,
                                              "\" holds data of another type than its datatype ",
                                              Sv(DataTypeName(tensor.datatype))));
    }
    absl::StatusOr<size_t> count =
        ElementCount(tensor.shape, std::numeric_limits<size_t>::max(), tensor.name);
    if (!count.ok()) return errors::Internal(std::string(count.status().message()));
    if (*count != TensorDataSize(tensor.data)) {
      return errors::Internal(absl::StrCat("output \"", tensor.name, "\" has ",
                                              TensorDataSize(tensor.data),
                                              " elements but its shape needs ", *count));
    }
    json item = json::object();
    item["name"] = tensor.name;
    item["datatype"] = std::string(DataTypeName(tensor.datatype));
    item["shape"] = tensor.shape;
    json parameters = ParametersToJson(tensor.parameters);
    if (OutputWantsBinary(request, tensor.name)) {
      const size_t before = binary.size();
      EncodeBinaryTensor(tensor.data, &binary);
      parameters["binary_data_size"] = binary.size() - before;
      any_binary = true;
    } else {
      item["data"] = DataToJson(tensor.data);
    }
    if (!parameters.empty()) item["parameters"] = std::move(parameters);
    outputs.push_back(std::move(item));
  }
  out["outputs"] = std::move(outputs);

  RenderedInferResponse rendered;
  rendered.body = out.dump(-1, ' ', false, json::error_handler_t::replace);
  if (any_binary) {
    rendered.inference_header_content_length = rendered.body.size();
    rendered.body += binary;
  }
  return rendered;
}

}  // namespace tide::api
