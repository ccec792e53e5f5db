#include "server/grpc/kserve_proto.h"

#include <cstring>
#include <limits>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error.h"
#include "common/error_echo.h"
#include "common/status_macros.h"

namespace tide::grpc_edge {

namespace {

// As the JSON form: no model has more than a handful of dims.
constexpr int kMaxRank = 16;

absl::Status CountMismatch(const std::string& path, size_t got, const api::Tensor& tensor, size_t want) {
  return errors::InvalidInput(absl::StrCat("field '", path, "' has ", got, " elements but shape [",
                                           absl::StrJoin(tensor.shape, ","), "] needs ", want));
}

// Copies a repeated typed field into `out` after checking its size against the shape.
template <typename T, typename Repeated>
absl::Status CopyContents(const Repeated& values, size_t count, const std::string& path, const api::Tensor& tensor,
                          std::vector<T>* out) {
  if (static_cast<size_t>(values.size()) != count) return CountMismatch(path, values.size(), tensor, count);
  out->assign(values.begin(), values.end());
  return absl::OkStatus();
}

// The name of the contents field a tensor of `type` uses, and whether another one is filled.
const char* ContentsFieldFor(api::DataType type) {
  switch (type) {
    case api::DataType::kBool: return "bool_contents";
    case api::DataType::kInt32: return "int_contents";
    case api::DataType::kInt64: return "int64_contents";
    case api::DataType::kFp32: return "fp32_contents";
    case api::DataType::kFp64: return "fp64_contents";
    case api::DataType::kBytes: return "bytes_contents";
  }
  return "";
}

int FilledFields(const inference::InferTensorContents& c, const char** first) {
  int n = 0;
  auto note = [&](int size, const char* name) {
    if (size == 0) return;
    if (n++ == 0) *first = name;
  };
  note(c.bool_contents_size(), "bool_contents");
  note(c.int_contents_size(), "int_contents");
  note(c.int64_contents_size(), "int64_contents");
  note(c.uint_contents_size(), "uint_contents");
  note(c.uint64_contents_size(), "uint64_contents");
  note(c.fp32_contents_size(), "fp32_contents");
  note(c.fp64_contents_size(), "fp64_contents");
  note(c.bytes_contents_size(), "bytes_contents");
  return n;
}

absl::Status DecodeContents(const inference::InferTensorContents& c, size_t count, const std::string& path,
                            const api::RequestLimits& limits, api::Tensor* tensor) {
  const std::string field = absl::StrCat(path, ".contents.", ContentsFieldFor(tensor->datatype));
  const char* first = nullptr;
  const int filled = FilledFields(c, &first);
  if (filled > 1 || (filled == 1 && std::string_view(first) != ContentsFieldFor(tensor->datatype))) {
    return errors::InvalidInput(absl::StrCat("field '", path, ".contents': a ", std::string(api::DataTypeName(tensor->datatype)),
                                             " tensor carries its elements in ", ContentsFieldFor(tensor->datatype),
                                             " only"));
  }
  switch (tensor->datatype) {
    case api::DataType::kBool: {
      std::vector<uint8_t> v;
      if (static_cast<size_t>(c.bool_contents_size()) != count) {
        return CountMismatch(field, c.bool_contents_size(), *tensor, count);
      }
      v.reserve(count);
      for (bool b : c.bool_contents()) v.push_back(b ? 1 : 0);
      tensor->data = std::move(v);
      return absl::OkStatus();
    }
    case api::DataType::kInt32: {
      std::vector<int32_t> v;
      TIDE_RETURN_IF_ERROR(CopyContents(c.int_contents(), count, field, *tensor, &v));
      tensor->data = std::move(v);
      return absl::OkStatus();
    }
    case api::DataType::kInt64: {
      std::vector<int64_t> v;
      TIDE_RETURN_IF_ERROR(CopyContents(c.int64_contents(), count, field, *tensor, &v));
      tensor->data = std::move(v);
      return absl::OkStatus();
    }
    case api::DataType::kFp32: {
      std::vector<float> v;
      TIDE_RETURN_IF_ERROR(CopyContents(c.fp32_contents(), count, field, *tensor, &v));
      tensor->data = std::move(v);
      return absl::OkStatus();
    }
    case api::DataType::kFp64: {
      std::vector<double> v;
      TIDE_RETURN_IF_ERROR(CopyContents(c.fp64_contents(), count, field, *tensor, &v));
      tensor->data = std::move(v);
      return absl::OkStatus();
    }
    case api::DataType::kBytes: {
      if (static_cast<size_t>(c.bytes_contents_size()) != count) {
        return CountMismatch(field, c.bytes_contents_size(), *tensor, count);
      }
      std::vector<std::string> v;
      v.reserve(count);
      for (int i = 0; i < c.bytes_contents_size(); ++i) {
        const std::string& s = c.bytes_contents(i);
        if (s.size() > limits.max_text_chars) {
          return errors::InvalidInput(absl::StrCat("field '", field, "' element ", i, " has ", s.size(),
                                                   " bytes; the limit is max_text_chars=", limits.max_text_chars));
        }
        if (!api::IsValidUtf8(s)) {
          return errors::InvalidInput(absl::StrCat("field '", field, "' element ", i, " is not valid UTF-8"));
        }
        v.push_back(s);
      }
      tensor->data = std::move(v);
      return absl::OkStatus();
    }
  }
  return errors::Internal("unknown datatype");
}

absl::StatusOr<bool> BoolParameter(const api::Parameters& parameters, std::string_view name, const std::string& path,
                                   std::optional<bool>* out) {
  auto it = parameters.find(name);
  if (it == parameters.end()) return false;
  const bool* value = std::get_if<bool>(&it->second);
  if (value == nullptr) return errors::InvalidInput(absl::StrCat("field '", path, "' must be a boolean"));
  *out = *value;
  return true;
}

void AppendTyped(const api::TensorData& data, inference::InferTensorContents* c) {
  std::visit(
      [c](const auto& values) {
        using T = typename std::decay_t<decltype(values)>::value_type;
        for (const T& v : values) {
          if constexpr (std::is_same_v<T, std::string>) {
            c->add_bytes_contents(v);
          } else if constexpr (std::is_same_v<T, float>) {
            c->add_fp32_contents(v);
          } else if constexpr (std::is_same_v<T, double>) {
            c->add_fp64_contents(v);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            c->add_int64_contents(v);
          } else if constexpr (std::is_same_v<T, int32_t>) {
            c->add_int_contents(v);
          } else {
            c->add_bool_contents(v != 0);
          }
        }
      },
      data);
}

}  // namespace

absl::StatusOr<api::Parameters> ParametersFromProto(const ProtoParameters& parameters, std::string_view path) {
  api::Parameters out;
  for (const auto& [key, value] : parameters) {
    switch (value.parameter_choice_case()) {
      case inference::InferParameter::kBoolParam: out.emplace(key, value.bool_param()); break;
      case inference::InferParameter::kInt64Param: out.emplace(key, value.int64_param()); break;
      case inference::InferParameter::kStringParam: out.emplace(key, value.string_param()); break;
      case inference::InferParameter::kDoubleParam: out.emplace(key, value.double_param()); break;
      case inference::InferParameter::kUint64Param:
        if (value.uint64_param() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return errors::InvalidInput(absl::StrCat("field '", std::string(path), ".", EchoForError(key), "' is ",
                                                   value.uint64_param(), "; the largest accepted is ",
                                                   std::numeric_limits<int64_t>::max()));
        }
        out.emplace(key, static_cast<int64_t>(value.uint64_param()));
        break;
      case inference::InferParameter::PARAMETER_CHOICE_NOT_SET:
        return errors::InvalidInput(absl::StrCat("field '", std::string(path), ".", EchoForError(key), "' has no value"));
    }
  }
  return out;
}

void ParametersToProto(const api::Parameters& parameters, ProtoParameters* out) {
  for (const auto& [key, value] : parameters) {
    inference::InferParameter& p = (*out)[key];
    std::visit(
        [&p](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, bool>) {
            p.set_bool_param(v);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            p.set_int64_param(v);
          } else if constexpr (std::is_same_v<T, double>) {
            p.set_double_param(v);
          } else {
            p.set_string_param(v);
          }
        },
        value);
  }
}

absl::StatusOr<api::InferRequest> InferRequestFromProto(const inference::ModelInferRequest& proto,
                                                        const api::RequestLimits& limits) {
  api::InferRequest request;
  if (proto.id().size() > limits.max_text_chars) {
    return errors::InvalidInput(absl::StrCat("field 'id' has ", proto.id().size(),
                                             " bytes; the limit is max_text_chars=", limits.max_text_chars));
  }
  request.id = proto.id();
  TIDE_ASSIGN_OR_RETURN(request.parameters, ParametersFromProto(proto.parameters(), "parameters"));
  const bool raw = proto.raw_input_contents_size() > 0;
  request.binary_data_output = raw;
  std::optional<bool> binary_data_output;
  TIDE_ASSIGN_OR_RETURN(const bool given, BoolParameter(request.parameters, "binary_data_output",
                                                             "parameters.binary_data_output", &binary_data_output));
  if (given) request.binary_data_output = *binary_data_output;

  if (proto.inputs_size() == 0) return errors::InvalidInput("field 'inputs' must not be empty");
  if (raw && proto.raw_input_contents_size() != proto.inputs_size()) {
    return errors::InvalidInput(absl::StrCat("field 'raw_input_contents' has ", proto.raw_input_contents_size(),
                                             " entries for ", proto.inputs_size(),
                                             " inputs; send every input raw or none"));
  }
  request.inputs.resize(proto.inputs_size());
  std::set<std::string_view> names;
  for (int i = 0; i < proto.inputs_size(); ++i) {
    const inference::ModelInferRequest::InferInputTensor& in = proto.inputs(i);
    const std::string path = absl::StrCat("inputs[", i, "]");
    api::Tensor& tensor = request.inputs[i];
    if (in.name().empty()) return errors::InvalidInput(absl::StrCat("field '", path, ".name' must not be empty"));
    if (in.name().size() > limits.max_text_chars) {
      return errors::InvalidInput(absl::StrCat("field '", path, ".name' has ", in.name().size(),
                                               " bytes; the limit is max_text_chars=", limits.max_text_chars));
    }
    tensor.name = in.name();
    if (!names.insert(tensor.name).second) {
      return errors::InvalidInput(absl::StrCat("field '", path, ".name': input \"", EchoForError(tensor.name),
                                               "\" is given more than once"));
    }
    TIDE_ASSIGN_OR_RETURN(tensor.datatype, api::ParseDataType(in.datatype(), absl::StrCat(path, ".datatype")));
    if (in.shape_size() > kMaxRank) {
      return errors::InvalidInput(absl::StrCat("field '", path, ".shape' has ", in.shape_size(), " dims; at most ",
                                               kMaxRank, " are supported"));
    }
    tensor.shape.assign(in.shape().begin(), in.shape().end());
    TIDE_ASSIGN_OR_RETURN(const size_t count, api::CheckTensorShape(tensor, absl::StrCat(path, ".shape"), limits));
    TIDE_ASSIGN_OR_RETURN(tensor.parameters,
                               ParametersFromProto(in.parameters(), absl::StrCat(path, ".parameters")));
    if (raw) {
      const char* first = nullptr;
      if (FilledFields(in.contents(), &first) > 0) {
        return errors::InvalidInput(absl::StrCat("field '", path, ".contents' is set beside raw_input_contents[", i,
                                                 "]; send one"));
      }
      TIDE_RETURN_IF_ERROR(api::DecodeBinaryTensor(proto.raw_input_contents(i), count,
                                                        absl::StrCat("raw_input_contents[", i, "]"), limits, &tensor));
    } else {
      TIDE_RETURN_IF_ERROR(DecodeContents(in.contents(), count, path, limits, &tensor));
    }
  }

  request.outputs.resize(proto.outputs_size());
  for (int i = 0; i < proto.outputs_size(); ++i) {
    const std::string path = absl::StrCat("outputs[", i, "]");
    api::InferRequestedOutput& out = request.outputs[i];
    out.name = proto.outputs(i).name();
    if (out.name.size() > limits.max_text_chars) {
      return errors::InvalidInput(absl::StrCat("field '", path, ".name' has ", out.name.size(),
                                               " bytes; the limit is max_text_chars=", limits.max_text_chars));
    }
    TIDE_ASSIGN_OR_RETURN(out.parameters,
                               ParametersFromProto(proto.outputs(i).parameters(), absl::StrCat(path, ".parameters")));
    std::optional<bool> binary;
    TIDE_ASSIGN_OR_RETURN(const bool has_binary, BoolParameter(out.parameters, "binary_data",
                                                                    absl::StrCat(path, ".parameters.binary_data"),
                                                                    &binary));
    if (has_binary) out.binary_data = binary;
  }
  return request;
}

absl::Status InferResponseToProto(const api::InferResponse& response, const api::InferRequest& request,
                                  inference::ModelInferResponse* out) {
  out->set_model_name(response.model_name);
  out->set_model_version(response.model_version);
  out->set_id(response.id);
  ParametersToProto(response.parameters, out->mutable_parameters());
  bool any_raw = false;
  for (const api::Tensor& t : response.outputs) any_raw = any_raw || api::OutputWantsBinary(request, t.name);
  for (const api::Tensor& t : response.outputs) {
    if (!api::DataMatchesType(t.data, t.datatype)) {
      return errors::Internal(absl::StrCat("output '", t.name, "' data does not match its datatype"));
    }
    inference::ModelInferResponse::InferOutputTensor* o = out->add_outputs();
    o->set_name(t.name);
    o->set_datatype(std::string(api::DataTypeName(t.datatype)));
    for (int64_t d : t.shape) o->add_shape(d);
    ParametersToProto(t.parameters, o->mutable_parameters());
    // raw_output_contents has one entry per output once any output is raw (an empty one for a
    // typed output), as the protocol lays it out.
    if (api::OutputWantsBinary(request, t.name)) {
      api::EncodeBinaryTensor(t.data, out->add_raw_output_contents());
    } else {
      AppendTyped(t.data, o->mutable_contents());
      if (any_raw) out->add_raw_output_contents();
    }
  }
  return absl::OkStatus();
}

}  // namespace tide::grpc_edge
