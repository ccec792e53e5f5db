#include "config/model_config.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "common/status_macros.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "config/tide_parameters.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace tide::config {
namespace {

using common::AbslView;

// Triton ModelConfig fields (top level and nested) that tide's proto leaves out on purpose, with
// the reason given to the user.
struct Unsupported {
  const char* field;
  const char* why;
};
constexpr Unsupported kUnsupported[] = {
    {"sequence_batching", "sequence batching (stateful models) is not supported by tide; use dynamic_batching"},
    {"ensemble_scheduling", "ensembles are not supported by tide; serve each model on its own"},
    {"optimization", "Triton's optimization settings (execution accelerators, CUDA graphs) cannot be honoured by tide; set graph_optimization_level in parameters instead"},
    {"batch_input", "batch inputs are not supported by tide"},
    {"batch_output", "batch outputs are not supported by tide"},
    {"cc_model_filenames", "compute-capability model files are not supported by tide (CPU only); use default_model_filename"},
    {"model_operations", "custom operation libraries are not supported by tide"},
    {"model_transaction_policy", "decoupled models are not supported by tide"},
    {"model_repository_agents", "repository agents are not supported by tide"},
    {"response_cache", "the response cache is not supported by tide"},
    {"model_metrics", "custom metric settings are not supported by tide"},
    {"runtime", "custom backend libraries are not supported by tide"},
    {"rate_limiter", "the rate limiter is not supported by tide"},
    {"secondary_devices", "secondary devices are not supported by tide"},
    {"profile", "TensorRT optimization profiles do not apply to tide"},
    {"passive", "passive instances are not supported by tide"},
    {"host_policy", "host policies are not supported by tide"},
    {"is_shape_tensor", "shape tensors do not apply to tide's token tensors"},
    {"allow_ragged_batch", "ragged batches are not supported by tide (it pads)"},
    {"is_non_linear_format_io", "non-linear IO formats are TensorRT-only"},
};

// Keeps the first error the protobuf text parser reports (later ones are usually consequences).
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (has_error_) return;
    has_error_ = true;
    line_ = line;
    column_ = column;
    message_ = message;
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}

  bool has_error_ = false;
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

// The last `identifier:` or `identifier {` before `column` on `line` of `text`: the field whose
// value the parser choked on.
std::string FieldAt(absl::string_view text, int line, int column) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (line < 0 || line >= static_cast<int>(lines.size())) return "";
  absl::string_view l = lines[line].substr(0, std::min<size_t>(lines[line].size(), column));
  std::string last;
  size_t i = 0;
  while (i < l.size()) {
    if (l[i] == '"' || l[i] == '\'') {  // skip string literals
      char q = l[i++];
      while (i < l.size() && l[i] != q) i += (l[i] == '\\') ? 2 : 1;
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(l[i])) || l[i] == '_') {
      size_t start = i;
      while (i < l.size() && (std::isalnum(static_cast<unsigned char>(l[i])) || l[i] == '_')) ++i;
      size_t j = i;
      while (j < l.size() && (l[j] == ' ' || l[j] == '\t')) ++j;
      if (j < l.size() && (l[j] == ':' || l[j] == '{' || l[j] == '<')) {
        last = std::string(l.substr(start, i - start));
      }
      continue;
    }
    ++i;
  }
  return last;
}

// "has no field named \"x\"" -> x
std::string UnknownFieldName(const std::string& message) {
  static constexpr std::string_view kMarker = "has no field named \"";
  size_t pos = message.find(kMarker);
  if (pos == std::string::npos) return "";
  pos += kMarker.size();
  size_t end = message.find('"', pos);
  if (end == std::string::npos) return "";
  return message.substr(pos, end - pos);
}

absl::Status FieldError(absl::string_view file, absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": ", field, ": ", message));
}

std::string Dims(const google::protobuf::RepeatedField<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

bool IsOrtPlatform(const ModelConfig& c) {
  return c.platform() == kOnnxRuntimePlatform || c.backend() == kOnnxRuntimeBackend;
}

}  // namespace

bool IsModelFileName(std::string_view name) {
  if (name.empty() || name == "." || name == "..") return false;
  return name.find_first_of(std::string_view("/\\\0", 3)) == std::string_view::npos;
}

std::string_view DataTypeName(DataType type) {
  const std::string& name = DataType_Name(type);
  return name.empty() ? std::string_view("TYPE_?") : std::string_view(name);
}

// A config is a few KiB; refuse what the stream API (int sizes) and memory should not see.
static absl::Status CheckConfigSize(absl::string_view text, absl::string_view file) {
  constexpr size_t kMaxConfigBytes = 16 << 20;
  if (text.size() > kMaxConfigBytes) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", text.size(), " bytes; a config may have at most ", kMaxConfigBytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view text_in, std::string_view file_in) {
  const absl::string_view text = AbslView(text_in), file = AbslView(file_in);
  if (absl::Status s = CheckConfigSize(text, file); !s.ok()) return s;
  ModelConfig config;
  FirstErrorCollector errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  // Not AllowUnknownField: a misspelt field must fail, not be ignored.
  google::protobuf::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  if (parser.Parse(&input, &config)) return config;

  std::string where = absl::StrCat(file, ":", errors.line_ + 1, ":", errors.column_ + 1);
  if (!errors.has_error_) return absl::InvalidArgumentError(absl::StrCat(where, ": cannot parse"));
  if (std::string unknown = UnknownFieldName(errors.message_); !unknown.empty()) {
    for (const Unsupported& u : kUnsupported) {
      if (unknown == u.field) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ", unknown, ": unsupported: ", u.why));
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", unknown, ": unknown field (", errors.message_, ")"));
  }
  std::string field = FieldAt(text, errors.line_, errors.column_);
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", field.empty() ? "" : absl::StrCat(field, ": "), errors.message_));
}

absl::StatusOr<ModelConfig> ParseModelConfigJson(std::string_view json_in, std::string_view file_in) {
  const absl::string_view json = AbslView(json_in), file = AbslView(file_in);
  if (absl::Status s = CheckConfigSize(json, file); !s.ok()) return s;
  ModelConfig config;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;  // a misspelt field must fail, not be ignored
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &config, options);
  if (status.ok()) return config;
  const std::string message(status.message());
  // protobuf 3.21: "<path>: Cannot find field." (the path as written, e.g. "dynamic_batching.x").
  static constexpr std::string_view kMarker = ": Cannot find field";
  if (size_t pos = message.find(kMarker); pos != std::string::npos) {
    const std::string path = message.substr(0, pos);
    const size_t dot = path.rfind('.');
    const std::string unknown = dot == std::string::npos ? path : path.substr(dot + 1);
    for (const Unsupported& u : kUnsupported) {
      if (unknown == u.field) return FieldError(file, path, absl::StrCat("unsupported: ", u.why));
    }
    return FieldError(file, path, "unknown field");
  }
  return absl::InvalidArgumentError(absl::StrCat(file, ": ", message));
}

absl::StatusOr<ModelConfig> ReadModelConfigFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot open"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path.string(), ": read error"));
  return ParseModelConfig(buffer.str(), path.string());
}

absl::Status NormalizeModelConfig(std::string_view /*file*/, const ModelSignature& model,
                                  ModelConfig* config, const NormalizeOptions& options) {
  ModelConfig& c = *config;
  if (c.platform().empty() && c.backend().empty()) {
    c.set_platform(std::string(kOnnxRuntimePlatform));
    c.set_backend(std::string(kOnnxRuntimeBackend));
  } else if (c.platform().empty() && c.backend() == kOnnxRuntimeBackend) {
    c.set_platform(std::string(kOnnxRuntimePlatform));
  } else if (c.backend().empty() && c.platform() == kOnnxRuntimePlatform) {
    c.set_backend(std::string(kOnnxRuntimeBackend));
  }

  const DataType id_type = model.ids_are_int32 ? TYPE_INT32 : TYPE_INT64;
  if (c.input_size() == 0) {
    for (const std::string* name :
         {&model.input_ids_name, &model.attention_mask_name, &model.token_type_ids_name}) {
      if (name->empty()) continue;
      ModelInput* in = c.add_input();
      in->set_name(*name);
      in->set_data_type(id_type);
      in->add_dims(-1);
    }
    if (c.max_batch_size() == 0) c.set_max_batch_size(options.default_max_batch_size);
  }
  if (c.output_size() == 0) {
    ModelOutput* out = c.add_output();
    out->set_name(model.logits_name);
    out->set_data_type(TYPE_FP32);
    out->add_dims(model.num_labels);
  }
  // Fill data types and dims left out of listed tensors that the model declares.
  for (ModelInput& in : *c.mutable_input()) {
    if (in.data_type() == TYPE_INVALID) in.set_data_type(id_type);
    if (in.dims_size() == 0) in.add_dims(-1);
  }
  for (ModelOutput& out : *c.mutable_output()) {
    if (out.data_type() == TYPE_INVALID) out.set_data_type(TYPE_FP32);
    if (out.dims_size() == 0 && out.name() == model.logits_name) out.add_dims(model.num_labels);
  }

  if (!c.has_version_policy()) c.mutable_version_policy()->mutable_latest()->set_num_versions(1);
  if (c.version_policy().has_latest() && c.version_policy().latest().num_versions() == 0) {
    c.mutable_version_policy()->mutable_latest()->set_num_versions(1);
  }
  if (c.instance_group_size() == 0) c.add_instance_group();
  for (int i = 0; i < c.instance_group_size(); ++i) {
    ModelInstanceGroup* g = c.mutable_instance_group(i);
    if (g->name().empty()) g->set_name(absl::StrCat(c.name(), "_", i));
    if (g->count() == 0) g->set_count(1);
    if (g->kind() == ModelInstanceGroup::KIND_AUTO && g->gpus_size() == 0) {
      g->set_kind(ModelInstanceGroup::KIND_CPU);
    }
  }
  if (c.default_model_filename().empty()) {
    c.set_default_model_filename(std::string(kDefaultModelFilename));
  }
  if (c.has_dynamic_batching()) {
    ModelDynamicBatching* db = c.mutable_dynamic_batching();
    if (db->priority_levels() > 0 && db->default_priority_level() == 0) {
      db->set_default_priority_level(db->priority_levels());  // Triton: lowest priority by default
    }
  }
  return absl::OkStatus();
}

namespace {

// Validators per config section (Triton's ValidateModelConfig hands off the same way). Each
// returns the first error, naming the file and the field.

// Name, platform or backend, max_batch_size and default_model_filename.
absl::Status ValidateModelBasics(absl::string_view file, const ModelConfig& c) {
  if (c.name().empty()) return FieldError(file, "name", "must not be empty");
  if (!c.platform().empty() && c.platform() != kOnnxRuntimePlatform) {
    return FieldError(file, "platform",
                      absl::StrCat("\"", c.platform(), "\" is not supported; tide serves \"",
                                   AbslView(kOnnxRuntimePlatform), "\" models"));
  }
  if (!c.backend().empty() && c.backend() != kOnnxRuntimeBackend) {
    return FieldError(file, "backend",
                      absl::StrCat("\"", c.backend(), "\" is not supported; tide serves \"",
                                   AbslView(kOnnxRuntimeBackend), "\" models"));
  }
  if (!IsOrtPlatform(c)) {
    return FieldError(file, "platform", "missing: set platform \"onnxruntime_onnx\" or backend \"onnxruntime\"");
  }
  if (c.max_batch_size() < 0) return FieldError(file, "max_batch_size", "must be >= 0");
  if (!IsModelFileName(c.default_model_filename())) {
    return FieldError(file, "default_model_filename",
                      "must be a file name inside the version directory (one path component: no '/', '\\', "
                      "'.' or '..')");
  }

  return absl::OkStatus();
}

// Inputs: token tensors of rank 1 (after the batch dim), int64 or int32, matching the model's when
// it is known. Fills `input_names` for the warm-up check.
absl::Status ValidateModelInputs(absl::string_view file, const ModelConfig& c, const ModelSignature* model,
                                 std::set<std::string>* input_names_out) {
  if (c.input_size() == 0) return FieldError(file, "input", "no inputs (normalize against the model first)");
  std::set<std::string>& input_names = *input_names_out;
  DataType ids_type = TYPE_INVALID;
  for (int i = 0; i < c.input_size(); ++i) {
    const ModelInput& in = c.input(i);
    std::string f = absl::StrCat("input[", i, "]");
    if (in.name().empty()) return FieldError(file, f + ".name", "must not be empty");
    if (!input_names.insert(in.name()).second) {
      return FieldError(file, f + ".name", absl::StrCat("duplicate input \"", in.name(), "\""));
    }
    if (in.data_type() != TYPE_INT64 && in.data_type() != TYPE_INT32) {
      return FieldError(file, f + ".data_type",
                        absl::StrCat(AbslView(DataTypeName(in.data_type())), " for input \"", in.name(),
                                     "\"; token tensors must be TYPE_INT64 or TYPE_INT32"));
    }
    if (ids_type != TYPE_INVALID && in.data_type() != ids_type) {
      return FieldError(file, f + ".data_type", "all token inputs must share one data type");
    }
    ids_type = in.data_type();
    if (in.format() != ModelInput::FORMAT_NONE) {
      return FieldError(file, f + ".format", "image formats do not apply to token tensors");
    }
    if (in.has_reshape()) return FieldError(file, f + ".reshape", "unsupported by tide");
    const int want_rank = c.max_batch_size() > 0 ? 1 : 2;
    if (in.dims_size() != want_rank) {
      return FieldError(file, f + ".dims",
                        absl::StrCat(Dims(in.dims()), " must have ", want_rank,
                                     want_rank == 1 ? " dim ([sequence]; the batch dim is implied by max_batch_size > 0)"
                                                    : " dims ([batch, sequence]) when max_batch_size is 0"));
    }
    for (int64_t d : in.dims()) {
      if (d == 0 || d < -1) return FieldError(file, f + ".dims", absl::StrCat(Dims(in.dims()), ": each dim must be -1 or > 0"));
    }
    if (model != nullptr) {
      const bool known = in.name() == model->input_ids_name ||
                         in.name() == model->attention_mask_name ||
                         (!model->token_type_ids_name.empty() && in.name() == model->token_type_ids_name);
      if (!known) {
        return FieldError(file, f + ".name",
                          absl::StrCat("the model has no input \"", in.name(), "\""));
      }
      const DataType model_type = model->ids_are_int32 ? TYPE_INT32 : TYPE_INT64;
      if (in.data_type() != model_type) {
        return FieldError(file, f + ".data_type",
                          absl::StrCat(AbslView(DataTypeName(in.data_type())), " but the model declares ",
                                       AbslView(DataTypeName(model_type)), " for \"", in.name(), "\""));
      }
    }
  }
  if (model != nullptr) {
    for (const std::string* name :
         {&model->input_ids_name, &model->attention_mask_name, &model->token_type_ids_name}) {
      if (!name->empty() && !input_names.count(*name)) {
        return FieldError(file, "input", absl::StrCat("the model's input \"", *name, "\" is not listed"));
      }
    }
  }

  return absl::OkStatus();
}

// Outputs: the score/logits tensor, FP32, [N] after the batch dim.
absl::Status ValidateModelOutputs(absl::string_view file, const ModelConfig& c, const ModelSignature* model) {
  if (c.output_size() == 0) return FieldError(file, "output", "no outputs (normalize against the model first)");
  std::set<std::string> output_names;
  for (int i = 0; i < c.output_size(); ++i) {
    const ModelOutput& out = c.output(i);
    std::string f = absl::StrCat("output[", i, "]");
    if (out.name().empty()) return FieldError(file, f + ".name", "must not be empty");
    if (!output_names.insert(out.name()).second) {
      return FieldError(file, f + ".name", absl::StrCat("duplicate output \"", out.name(), "\""));
    }
    if (out.data_type() != TYPE_FP32) {
      return FieldError(file, f + ".data_type",
                        absl::StrCat(AbslView(DataTypeName(out.data_type())), " for output \"", out.name(),
                                     "\"; tide reads TYPE_FP32 scores/logits"));
    }
    if (out.has_reshape()) return FieldError(file, f + ".reshape", "unsupported by tide");
    const int want_rank = c.max_batch_size() > 0 ? 1 : 2;
    if (out.dims_size() != want_rank) {
      return FieldError(file, f + ".dims",
                        absl::StrCat(Dims(out.dims()), " must have ", want_rank,
                                     want_rank == 1 ? " dim ([num_labels])" : " dims ([batch, num_labels])"));
    }
    for (int64_t d : out.dims()) {
      if (d == 0 || d < -1) return FieldError(file, f + ".dims", absl::StrCat(Dims(out.dims()), ": each dim must be -1 or > 0"));
    }
    if (model != nullptr && out.name() == model->logits_name && model->num_labels > 0) {
      const int64_t labels = out.dims(out.dims_size() - 1);
      if (labels != -1 && labels != model->num_labels) {
        return FieldError(file, f + ".dims",
                          absl::StrCat(Dims(out.dims()), " but the model's \"", out.name(),
                                       "\" has ", model->num_labels, " labels"));
      }
    }
  }
  if (model != nullptr && !output_names.count(model->logits_name)) {
    return FieldError(file, "output", absl::StrCat("the model's output \"", model->logits_name, "\" is not listed"));
  }

  return absl::OkStatus();
}

absl::Status ValidateVersionPolicy(absl::string_view file, const ModelConfig& c) {
  const ModelVersionPolicy& vp = c.version_policy();
  if (vp.has_specific()) {
    if (vp.specific().versions_size() == 0) {
      return FieldError(file, "version_policy.specific.versions", "must list at least one version");
    }
    for (int64_t v : vp.specific().versions()) {
      if (v < 0) return FieldError(file, "version_policy.specific.versions", absl::StrCat(v, " is negative"));
    }
  }

  return absl::OkStatus();
}

// Instance groups: CPU only, counts bounded per group and in all (summed in 64 bits, each bounded
// first, so no sum overflows).
absl::Status ValidateInstanceGroups(absl::string_view file, const ModelConfig& c) {
  int64_t instances = 0;
  for (int i = 0; i < c.instance_group_size(); ++i) {
    const ModelInstanceGroup& g = c.instance_group(i);
    std::string f = absl::StrCat("instance_group[", i, "]");
    if (g.count() < 0 || g.count() > kMaxInstanceCount) {
      return FieldError(file, f + ".count", absl::StrCat(g.count(), " is outside 1..", kMaxInstanceCount));
    }
    instances += std::max<int64_t>(g.count(), 1);
    if (instances > kMaxModelInstances) {
      return FieldError(file, "instance_group",
                        absl::StrCat("the groups' counts add up to more than ", kMaxModelInstances,
                                     " instances (at ", f, ")"));
    }
    if (g.kind() == ModelInstanceGroup::KIND_GPU || g.gpus_size() > 0) {
      return FieldError(file, g.kind() == ModelInstanceGroup::KIND_GPU ? f + ".kind" : f + ".gpus",
                        "GPU instances are not supported: tide runs ONNX Runtime on CPU (use KIND_CPU)");
    }
    if (g.kind() == ModelInstanceGroup::KIND_MODEL) {
      return FieldError(file, f + ".kind", "KIND_MODEL is not supported (use KIND_CPU)");
    }
  }

  return absl::OkStatus();
}

absl::Status ValidateDynamicBatching(absl::string_view file, const ModelConfig& c) {
  if (c.has_dynamic_batching()) {
    const ModelDynamicBatching& db = c.dynamic_batching();
    if (c.max_batch_size() == 0) {
      return FieldError(file, "dynamic_batching", "needs max_batch_size > 0");
    }
    for (int i = 0; i < db.preferred_batch_size_size(); ++i) {
      const int32_t b = db.preferred_batch_size(i);
      if (b <= 0 || b > c.max_batch_size()) {
        return FieldError(file, absl::StrCat("dynamic_batching.preferred_batch_size[", i, "]"),
                          absl::StrCat(b, " is outside [1, max_batch_size=", c.max_batch_size(), "]"));
      }
    }
    if (db.priority_levels() == 0) {
      if (db.default_priority_level() != 0) {
        return FieldError(file, "dynamic_batching.default_priority_level", "needs priority_levels > 0");
      }
      if (!db.priority_queue_policy().empty()) {
        return FieldError(file, "dynamic_batching.priority_queue_policy", "needs priority_levels > 0");
      }
    } else {
      if (db.default_priority_level() < 1 || db.default_priority_level() > db.priority_levels()) {
        return FieldError(file, "dynamic_batching.default_priority_level",
                          absl::StrCat(db.default_priority_level(), " is outside [1, priority_levels=",
                                       db.priority_levels(), "]"));
      }
      for (const auto& [level, policy] : db.priority_queue_policy()) {
        if (level < 1 || level > db.priority_levels()) {
          return FieldError(file, absl::StrCat("dynamic_batching.priority_queue_policy[", level, "]"),
                            absl::StrCat("priority level is outside [1, priority_levels=", db.priority_levels(), "]"));
        }
      }
    }
  }

  return absl::OkStatus();
}

// Warm-up requests: each names every input of the config, with positive dims and a data source.
absl::Status ValidateModelWarmup(absl::string_view file, const ModelConfig& c, const std::set<std::string>& input_names) {
  for (int i = 0; i < c.model_warmup_size(); ++i) {
    const ModelWarmup& w = c.model_warmup(i);
    std::string f = absl::StrCat("model_warmup[", i, "]");
    if (w.name().empty()) return FieldError(file, f + ".name", "must not be empty");
    if (c.max_batch_size() > 0 && (w.batch_size() < 1 || static_cast<int64_t>(w.batch_size()) > c.max_batch_size())) {
      return FieldError(file, f + ".batch_size",
                        absl::StrCat(w.batch_size(), " is outside [1, max_batch_size=", c.max_batch_size(), "]"));
    }
    if (w.inputs().empty()) return FieldError(file, f + ".inputs", "must give the model's inputs");
    for (const auto& [name, in] : w.inputs()) {
      std::string fi = absl::StrCat(f, ".inputs[\"", name, "\"]");
      if (!input_names.count(name)) return FieldError(file, fi, "not an input of this config");
      if (in.data_type() != TYPE_INT64 && in.data_type() != TYPE_INT32) {
        return FieldError(file, fi + ".data_type", absl::StrCat(AbslView(DataTypeName(in.data_type())), "; must be TYPE_INT64 or TYPE_INT32"));
      }
      if (in.dims_size() == 0) return FieldError(file, fi + ".dims", "must be given");
      for (int64_t d : in.dims()) {
        if (d <= 0) return FieldError(file, fi + ".dims", absl::StrCat(Dims(in.dims()), ": warmup dims must be > 0"));
      }
      if (in.input_data_type_case() == ModelWarmup::Input::INPUT_DATA_TYPE_NOT_SET) {
        return FieldError(file, fi, "needs one of zero_data, random_data, input_data_file");
      }
      if (in.has_input_data_file() &&
          (in.input_data_file().empty() || in.input_data_file().find("..") != std::string::npos ||
           in.input_data_file()[0] == '/')) {
        return FieldError(file, fi + ".input_data_file", "must be a file name inside the model's warmup/ directory");
      }
    }
    for (const std::string& name : input_names) {
      if (!w.inputs().count(name)) {
        return FieldError(file, f + ".inputs", absl::StrCat("missing input \"", name, "\""));
      }
    }
  }

  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateModelConfig(std::string_view file_in, const ModelConfig& c,
                                 const ModelSignature* model) {
  const absl::string_view file = AbslView(file_in);
  std::set<std::string> input_names;
  TIDE_RETURN_IF_ERROR(ValidateModelBasics(file, c));
  TIDE_RETURN_IF_ERROR(ValidateModelInputs(file, c, model, &input_names));
  TIDE_RETURN_IF_ERROR(ValidateModelOutputs(file, c, model));
  TIDE_RETURN_IF_ERROR(ValidateVersionPolicy(file, c));
  TIDE_RETURN_IF_ERROR(ValidateInstanceGroups(file, c));
  TIDE_RETURN_IF_ERROR(ValidateDynamicBatching(file, c));
  TIDE_RETURN_IF_ERROR(ValidateModelWarmup(file, c, input_names));
  // tide's own parameters.
  if (auto params = TideParameters::FromConfig(c, file_in); !params.ok()) return params.status();
  return absl::OkStatus();
}

}  // namespace tide::config
