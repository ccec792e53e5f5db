#include "runtime/ort_backend.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/error.h"
#include "common/status_macros.h"
#include "runtime/prompt_prefix.h"
#include "runtime/shared_weights.h"
#include "runtime/tide_ops.h"

namespace tide::runtime {
namespace {

constexpr std::string_view kTokenEmbeddingsOutput = "token_embeddings";

Ort::Env& SharedEnv() {
  // Leaked on purpose: sessions held by static objects must not outlive their Env.
  static Ort::Env* env = new Ort::Env(ORT_LOGGING_LEVEL_WARNING, "tide");
  return *env;
}

// One CPU arena on the shared Env for the sessions that share weights: an instance's activation
// memory, kept by a per-session arena after its largest batch, is otherwise the whole cost of
// another instance. Throws Ort::Exception (call_once then tries again on the next session).
void RegisterSharedArena() {
  static std::once_flag once;
  std::call_once(once, [] {
    const Ort::MemoryInfo cpu = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
    const Ort::ArenaCfg defaults(0, -1, -1, -1);  // ONNX Runtime's default arena settings
    SharedEnv().CreateAndRegisterAllocator(cpu, defaults);
  });
}

absl::Status FromOrt(const Ort::Exception& e, absl::string_view what) {
  std::string message = absl::StrCat(what, ": ", e.what());
  switch (e.GetOrtErrorCode()) {
    case ORT_INVALID_ARGUMENT:
      return absl::InvalidArgumentError(message);
    case ORT_NO_SUCHFILE:
      return absl::NotFoundError(message);
    case ORT_INVALID_PROTOBUF:
    case ORT_INVALID_GRAPH:
    case ORT_NOT_IMPLEMENTED:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

const char* OrtErrorCodeName(OrtErrorCode code) {
  switch (code) {
    case ORT_OK: return "ORT_OK";
    case ORT_FAIL: return "ORT_FAIL";
    case ORT_INVALID_ARGUMENT: return "ORT_INVALID_ARGUMENT";
    case ORT_NO_SUCHFILE: return "ORT_NO_SUCHFILE";
    case ORT_NO_MODEL: return "ORT_NO_MODEL";
    case ORT_ENGINE_ERROR: return "ORT_ENGINE_ERROR";
    case ORT_RUNTIME_EXCEPTION: return "ORT_RUNTIME_EXCEPTION";
    case ORT_INVALID_PROTOBUF: return "ORT_INVALID_PROTOBUF";
    case ORT_MODEL_LOADED: return "ORT_MODEL_LOADED";
    case ORT_NOT_IMPLEMENTED: return "ORT_NOT_IMPLEMENTED";
    case ORT_INVALID_GRAPH: return "ORT_INVALID_GRAPH";
    case ORT_EP_FAIL: return "ORT_EP_FAIL";
    default: return "ORT error";
  }
}

Ort::SessionOptions MakeSessionOptions(const OrtOptions& o) {
  Ort::SessionOptions so;
  if (o.intra_op_threads > 0) so.SetIntraOpNumThreads(o.intra_op_threads);
  if (o.inter_op_threads > 0) so.SetInterOpNumThreads(o.inter_op_threads);
  so.SetExecutionMode(ORT_SEQUENTIAL);
  so.AddConfigEntry("session.intra_op.allow_spinning", o.allow_spinning ? "1" : "0");
  so.AddConfigEntry("session.inter_op.allow_spinning", o.allow_spinning ? "1" : "0");
  switch (o.graph_optimization_level) {
    case GraphOptimization::kDisable: so.SetGraphOptimizationLevel(ORT_DISABLE_ALL); break;
    case GraphOptimization::kBasic: so.SetGraphOptimizationLevel(ORT_ENABLE_BASIC); break;
    case GraphOptimization::kExtended: so.SetGraphOptimizationLevel(ORT_ENABLE_EXTENDED); break;
    case GraphOptimization::kAll: so.SetGraphOptimizationLevel(ORT_ENABLE_ALL); break;
  }
  if (o.enable_cpu_mem_arena) so.EnableCpuMemArena(); else so.DisableCpuMemArena();
  RegisterTideOps(so);  // ai.tide.*: what load-time fusion may write (tide_ops.h)
  if (!o.prepack_weights) so.AddConfigEntry("session.disable_prepacking", "1");
  // A model in memory has no folder of its own: its only external data can be the placeholders
  // of a skeleton (SharedWeights::TakeFromModel), which its shared weights replace.
  if (o.model_path.empty()) {
    so.AddConfigEntry("session.model_external_initializers_file_folder_path", SharedWeights::kPlaceholderFolder);
  }
  return so;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Throws Ort::Exception (caught by the callers) on engine errors.
absl::StatusOr<ModelSignature> DiscoverSignature(Ort::Session& session, const std::string& model) {
  Ort::AllocatorWithDefaultOptions allocator;
  ModelSignature sig;
  sig.input_ids_name.clear();
  sig.attention_mask_name.clear();
  sig.logits_name.clear();
  ONNXTensorElementDataType ids_type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  for (size_t i = 0; i < session.GetInputCount(); ++i) {
    std::string name = session.GetInputNameAllocated(i, allocator).get();
    Ort::TypeInfo type = session.GetInputTypeInfo(i);
    if (type.GetONNXType() != ONNX_TYPE_TENSOR) {
      return absl::FailedPreconditionError(absl::StrCat(model, ": input \"", name, "\" is not a tensor"));
    }
    auto info = type.GetTensorTypeAndShapeInfo();
    const auto elem = info.GetElementType();
    const auto shape = info.GetShape();
    if (absl::StartsWith(name, kPromptPrefixInputStem)) {
      if (elem != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || shape.size() != 3 || shape[2] <= 0) {
        return absl::FailedPreconditionError(absl::StrCat(model, ": prompt prefix input \"", name, "\" has shape ",
                                                          ShapeString(shape), "; expected float [1, prefix, width]"));
      }
      sig.prompt_prefix.push_back(
          {name, absl::StrCat(kPromptPrefixOutputStem, name.substr(sizeof(kPromptPrefixInputStem) - 1)), shape[2]});
      continue;
    }
    std::string* slot = nullptr;
    if (name == "input_ids") slot = &sig.input_ids_name;
    else if (name == "attention_mask") slot = &sig.attention_mask_name;
    else if (name == "token_type_ids") slot = &sig.token_type_ids_name;
    if (slot == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          model, ": input \"", name,
          "\" is not one tide can feed (input_ids, attention_mask, token_type_ids)"));
    }
    if (elem != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 && elem != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32) {
      return absl::FailedPreconditionError(
          absl::StrCat(model, ": input \"", name, "\" has element type ", static_cast<int>(elem),
                       "; tide feeds int64 or int32 token ids"));
    }
    if (ids_type != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED && elem != ids_type) {
      return absl::FailedPreconditionError(
          absl::StrCat(model, ": input \"", name, "\" mixes int32 and int64 with the other inputs"));
    }
    ids_type = elem;
    if (shape.size() != 2) {
      return absl::FailedPreconditionError(absl::StrCat(model, ": input \"", name, "\" has shape ",
                                                        ShapeString(shape), "; expected [batch, sequence]"));
    }
    *slot = name;
  }
  if (sig.input_ids_name.empty() || sig.attention_mask_name.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(model, ": the model must take input_ids and attention_mask"));
  }
  sig.ids_are_int32 = ids_type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;

  bool found = false;
  std::vector<std::string> output_names;
  for (size_t i = 0; i < session.GetOutputCount(); ++i) {
    output_names.push_back(session.GetOutputNameAllocated(i, allocator).get());
  }
  for (const auto& slot : sig.prompt_prefix) {
    if (std::find(output_names.begin(), output_names.end(), slot.output) == output_names.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat(model, ": prompt prefix input \"", slot.input, "\" has no output \"", slot.output, "\""));
    }
  }
  for (size_t i = 0; i < session.GetOutputCount(); ++i) {
    Ort::TypeInfo type = session.GetOutputTypeInfo(i);
    if (type.GetONNXType() != ONNX_TYPE_TENSOR) continue;
    auto info = type.GetTensorTypeAndShapeInfo();
    if (info.GetElementType() != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) continue;
    const auto shape = info.GetShape();
    std::string name = session.GetOutputNameAllocated(i, allocator).get();
    if (shape.size() == 3 && name == kTokenEmbeddingsOutput) {
      sig.token_embeddings_name = std::move(name);
      continue;
    }
    if (shape.size() != 2 || found) continue;
    sig.logits_name = std::move(name);
    sig.num_labels = shape[1] > 0 ? shape[1] : -1;
    found = true;
  }
  if (found) return sig;
  return absl::FailedPreconditionError(
      absl::StrCat(model, ": no float output of rank 2 ([batch, num_labels]) among its ",
                   session.GetOutputCount(), " outputs"));
}

// OK when `prefix` (null: none) fits the model's prompt prefix slots (or the model has none).
absl::Status CheckPromptPrefix(const ModelSignature& signature, const PromptPrefix* prefix, const std::string& model) {
  if (signature.prompt_prefix.empty()) return absl::OkStatus();
  bool fits = true;
  for (const PromptPrefix* p = prefix; fits && p != nullptr; p = p->shorter.get()) {
    fits = p->values.size() == signature.prompt_prefix.size();
    for (size_t j = 0; fits && j < p->values.size(); ++j) {
      fits = static_cast<int64_t>(p->values[j].size()) == p->length() * signature.prompt_prefix[j].width;
    }
  }
  if (fits) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(model, ": the prompt prefix was not computed for this model"));
}

// Calls weights->ReleaseResident() every kEvery on its own thread until Stop() (or destruction);
// nothing with null weights. Dropping pages another thread is reading is safe: they fault back
// from the file.
class ResidentReleaser {
 public:
  static constexpr absl::Duration kEvery = absl::Milliseconds(25);

  explicit ResidentReleaser(const SharedModelWeights* weights) {
    if (weights == nullptr) return;
    thread_ = std::thread([this, weights] {
      while (!stop_.WaitForNotificationWithTimeout(kEvery)) weights->ReleaseResident();
    });
  }
  ~ResidentReleaser() { Stop(); }
  ResidentReleaser(const ResidentReleaser&) = delete;
  ResidentReleaser& operator=(const ResidentReleaser&) = delete;

  void Stop() {
    if (!thread_.joinable()) return;
    stop_.Notify();
    thread_.join();
  }

 private:
  absl::Notification stop_;
  std::thread thread_;
};

absl::StatusOr<Ort::Session> OpenSession(const OrtOptions& options, std::string* label,
                                         std::shared_ptr<SharedModelWeights>* weights = nullptr) {
  *label = !options.model_path.empty()   ? options.model_path
           : !options.model_label.empty() ? options.model_label
                                          : std::string("<in-memory model>");
  if (options.model_path.empty() && options.model_data.empty()) {
    return absl::InvalidArgumentError("OrtOptions: neither model_path nor model_data is set");
  }
  std::shared_ptr<SharedModelWeights> shared;
  if (options.shared_weights != nullptr && weights != nullptr) {
    auto s = options.shared_weights->ForModel(options.model_path, options.model_data);
    if (!s.ok()) return s.status();
    shared = *std::move(s);
  }
  try {
    Ort::SessionOptions so = MakeSessionOptions(options);
    OrtPrepackedWeightsContainer* prepacked = nullptr;
    if (shared != nullptr) {
      if (options.enable_cpu_mem_arena && options.share_env_arena) {
        RegisterSharedArena();
        so.AddConfigEntry("session.use_env_allocators", "1");
      }
      for (size_t i = 0; i < shared->names.size(); ++i) so.AddInitializer(shared->names[i].c_str(), shared->values[i]);
      prepacked = shared->prepacked;
      *weights = shared;
    }
    if (prepacked != nullptr) {
      // While ONNX Runtime pre-packs, the weights it has read leave the process as it goes (they
      // stay in the entry's file): the session's open holds the packed copies and little more.
      ResidentReleaser releaser(shared->file != nullptr || shared->base_file != nullptr ? shared.get() : nullptr);
      Ort::Session session =
          !options.model_path.empty()
              ? Ort::Session(SharedEnv(), options.model_path.c_str(), so, prepacked)
              : Ort::Session(SharedEnv(), options.model_data.data(), options.model_data.size(), so, prepacked);
      releaser.Stop();
      shared->ReleaseResident();  // the originals it pre-packed are not read again
      return session;
    }
    if (!options.model_path.empty()) return Ort::Session(SharedEnv(), options.model_path.c_str(), so);
    return Ort::Session(SharedEnv(), options.model_data.data(), options.model_data.size(), so);
  } catch (const Ort::Exception& e) {
    return FromOrt(e, absl::StrCat(*label, ": cannot load"));
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<Ort::Session>> AloneSessionSlot::Get(
    const std::function<absl::StatusOr<std::shared_ptr<Ort::Session>>()>& open) {
  absl::MutexLock lock(&mu_);
  if (auto live = session_.lock()) return live;
  auto opened = open();
  if (opened.ok()) session_ = *opened;
  return opened;
}

absl::StatusOr<std::unique_ptr<OrtBackend>> OrtBackend::Create(const OrtOptions& options) {
  std::string label;
  std::shared_ptr<SharedModelWeights> weights;
  auto session = OpenSession(options, &label, &weights);
  if (!session.ok()) return session.status();
  std::shared_ptr<Ort::Session> alone;
  if (options.alone_intra_op_threads > std::max(options.intra_op_threads, 1)) {
    auto open = [&]() -> absl::StatusOr<std::shared_ptr<Ort::Session>> {
      OrtOptions wide = options;
      wide.intra_op_threads = options.alone_intra_op_threads;
      std::shared_ptr<SharedModelWeights> same;  // the same entry as `weights` (or none)
      auto s = OpenSession(wide, &label, &same);
      if (!s.ok()) return s.status();
      // The deleter keeps the weights the session reads alive until the session is gone.
      return std::shared_ptr<Ort::Session>(new Ort::Session(*std::move(s)),
                                           [same](Ort::Session* p) { delete p; });
    };
    auto got = options.alone_session != nullptr ? options.alone_session->Get(open) : open();
    if (!got.ok()) return got.status();
    alone = *std::move(got);
  }
  try {
    auto signature = DiscoverSignature(*session, label);
    if (!signature.ok()) return signature.status();
    TIDE_RETURN_IF_ERROR(CheckPromptPrefix(*signature, options.prompt_prefix.get(), label));
    auto backend = std::unique_ptr<OrtBackend>(
        new OrtBackend(std::move(weights), *std::move(session), *std::move(signature), options.prompt_prefix));
    backend->alone_session_ = std::move(alone);
    return backend;
  } catch (const Ort::Exception& e) {
    return FromOrt(e, absl::StrCat(label, ": cannot read the signature"));
  }
}

absl::StatusOr<ModelSignature> OrtBackend::ReadSignature(const std::string& model_path) {
  OrtOptions options;
  options.graph_optimization_level = GraphOptimization::kDisable;
  options.intra_op_threads = 1;
  options.enable_cpu_mem_arena = false;
  options.prepack_weights = false;
  absl::StatusOr<SharedWeights::TakenModel> shapes = SharedWeights::ShapesOnly(model_path);
  if (!shapes.ok()) return shapes.status();
  std::shared_ptr<SharedModelWeights> weights;
  if (shapes->weights != nullptr) {
    // The graph alone, its weights over untouched pages: never run, so never read.
    options.model_data = std::move(shapes->skeleton);
    options.model_label = model_path;
    options.shared_weights = std::make_shared<SharedWeights>();
    options.shared_weights->Adopt("", options.model_data, shapes->weights);
  } else {
    options.model_path = model_path;  // built without libonnx-dev: ONNX Runtime reads the file
  }
  std::string label;
  auto session = OpenSession(options, &label, &weights);
  if (!session.ok()) return session.status();
  try {
    return DiscoverSignature(*session, label);
  } catch (const Ort::Exception& e) {
    return FromOrt(e, absl::StrCat(label, ": cannot read the signature"));
  }
}

OrtBackend::OrtBackend(std::shared_ptr<SharedModelWeights> weights, Ort::Session session, ModelSignature signature,
                       std::shared_ptr<const PromptPrefix> prompt_prefix)
    : weights_(std::move(weights)),
      session_(std::move(session)),
      signature_(std::move(signature)),
      memory_info_(Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault)),
      prompt_prefix_(signature_.prompt_prefix.empty() ? nullptr : std::move(prompt_prefix)) {
  input_names_.push_back(signature_.input_ids_name.c_str());
  input_names_.push_back(signature_.attention_mask_name.c_str());
  if (!signature_.token_type_ids_name.empty()) input_names_.push_back(signature_.token_type_ids_name.c_str());
  for (const auto& slot : signature_.prompt_prefix) input_names_.push_back(slot.input.c_str());
  output_name_ = signature_.logits_name.c_str();
  inputs_.reserve(input_names_.size());
  // A failed Run is reported through its exception (the caller logs it, rate-limited); ONNX
  // Runtime's own per-run error line would repeat it unbounded, once per failed batch.
  run_options_.SetRunLogSeverityLevel(ORT_LOGGING_LEVEL_FATAL);
}

OrtBackend::~OrtBackend() = default;

void OrtBackend::Terminator::Terminate() noexcept {
  terminated_.store(true, std::memory_order_release);
  // The C API: no exception on a live thread; it only stores ONNX Runtime's atomic flag.
  if (OrtStatus* st = Ort::GetApi().RunOptionsSetTerminate(options_); st != nullptr) Ort::GetApi().ReleaseStatus(st);
}

void OrtBackend::Terminator::Reset() noexcept {
  terminated_.store(false, std::memory_order_release);
  if (OrtStatus* st = Ort::GetApi().RunOptionsUnsetTerminate(options_); st != nullptr) Ort::GetApi().ReleaseStatus(st);
}

absl::Status OrtBackend::Run(const TokenBatch& batch, Logits* out) { return RunOn(session_, batch, out); }

absl::Status OrtBackend::RunAlone(const TokenBatch& batch, Logits* out) {
  return RunOn(alone_session_ != nullptr ? *alone_session_ : session_, batch, out);
}

absl::Status OrtBackend::RunOn(Ort::Session& session, const TokenBatch& batch, Logits* out) {
  try {
    return RunImpl(session, batch, out);
  } catch (const Ort::Exception& e) {
    if (terminator_.terminated()) return absl::CancelledError("onnxruntime Run terminated");
    // Whatever ONNX Runtime says about a batch (even ORT_INVALID_ARGUMENT for an out-of-range
    // index) is an engine failure, not a malformed client request: INTERNAL, engine text kept for
    // the log (serving::ModelRunner answers clients with a generic message).
    return errors::Backend(absl::StrCat("onnxruntime Run (", OrtErrorCodeName(e.GetOrtErrorCode()), "): ", e.what()));
  } catch (const std::bad_alloc&) {
    return errors::Overloaded("out of memory while running the model");
  }
}

absl::Status OrtBackend::CheckBatch(const TokenBatch& batch) const {
  const int64_t b = batch.batch, s = batch.seq_len;
  if (b <= 0 || s <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("empty batch [", b, ", ", s, "]"));
  }
  const size_t n = static_cast<size_t>(b * s);
  if (batch.input_ids.size() != n || batch.attention_mask.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch [", b, ", ", s, "] needs ", n, " ids and mask values, got ", batch.input_ids.size(),
        " and ", batch.attention_mask.size()));
  }
  if (!signature_.token_type_ids_name.empty() && !batch.token_type_ids.empty() && batch.token_type_ids.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("batch [", b, ", ", s, "] needs ", n,
                                                   " token_type_ids, got ", batch.token_type_ids.size()));
  }
  return absl::OkStatus();
}

void OrtBackend::CutPrefix(const TokenBatch& batch, int64_t p, TokenBatch* out) {
  const int64_t s = batch.seq_len - p;
  out->batch = batch.batch;
  out->seq_len = s;
  out->token_states = false;
  auto cut = [&](const std::vector<int64_t>& from, std::vector<int64_t>* to) {
    to->resize(static_cast<size_t>(batch.batch * s));
    for (int64_t r = 0; r < batch.batch; ++r) {
      std::copy_n(from.begin() + r * batch.seq_len + p, s, to->begin() + r * s);
    }
  };
  cut(batch.input_ids, &out->input_ids);
  cut(batch.attention_mask, &out->attention_mask);
  if (batch.token_type_ids.empty()) {
    out->token_type_ids.clear();
  } else {
    cut(batch.token_type_ids, &out->token_type_ids);
  }
}

absl::Status OrtBackend::BindInputs(const TokenBatch& batch, const PromptPrefix* prefix) {
  const int64_t b = batch.batch, s = batch.seq_len;
  const size_t n = static_cast<size_t>(b * s);
  const bool wants_types = !signature_.token_type_ids_name.empty();
  const std::array<int64_t, 2> shape{b, s};
  const int64_t* types = batch.token_type_ids.data();
  if (wants_types && batch.token_type_ids.empty()) {
    zero_types_.assign(n, 0);
    types = zero_types_.data();
  }

  inputs_.clear();
  if (!signature_.ids_are_int32) {
    // ONNX Runtime only reads inputs; the const_cast is required by its CreateTensor signature.
    auto wrap = [&](const int64_t* p) {
      inputs_.push_back(Ort::Value::CreateTensor<int64_t>(memory_info_, const_cast<int64_t*>(p), n,
                                                          shape.data(), shape.size()));
    };
    wrap(batch.input_ids.data());
    wrap(batch.attention_mask.data());
    if (wants_types) wrap(types);
  } else {
    auto convert = [&](const int64_t* p, std::vector<int32_t>* buf) {
      buf->resize(n);
      for (size_t i = 0; i < n; ++i) {
        if (p[i] > INT32_MAX || p[i] < INT32_MIN) return false;
        (*buf)[i] = static_cast<int32_t>(p[i]);
      }
      inputs_.push_back(Ort::Value::CreateTensor<int32_t>(memory_info_, buf->data(), n, shape.data(), shape.size()));
      return true;
    };
    if (!convert(batch.input_ids.data(), &ids32_) || !convert(batch.attention_mask.data(), &mask32_) ||
        (wants_types && !convert(types, &types32_))) {
      return absl::InvalidArgumentError("a token value does not fit the model's int32 inputs");
    }
  }
  // The prompt prefix slots: its keys and values, or an empty prefix.
  static float no_prefix = 0.0f;
  const int64_t p = prefix != nullptr ? prefix->length() : 0;
  for (size_t j = 0; j < signature_.prompt_prefix.size(); ++j) {
    const std::array<int64_t, 3> dims{1, p, signature_.prompt_prefix[j].width};
    // ONNX Runtime only reads inputs (the const_cast is its CreateTensor signature's).
    float* data = prefix != nullptr ? const_cast<float*>(prefix->values[j].data()) : &no_prefix;
    inputs_.push_back(Ort::Value::CreateTensor<float>(memory_info_, data, static_cast<size_t>(p * dims[2]), dims.data(),
                                                      dims.size()));
  }
  return absl::OkStatus();
}

absl::Status OrtBackend::UsePromptPrefix(std::shared_ptr<const PromptPrefix> prefix) {
  TIDE_RETURN_IF_ERROR(CheckPromptPrefix(signature_, prefix.get(), "this backend's model"));
  prompt_prefix_ = signature_.prompt_prefix.empty() ? nullptr : std::move(prefix);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<PromptPrefix>> OrtBackend::ComputePromptPrefix(const std::vector<int64_t>& ids) {
  if (signature_.prompt_prefix.empty()) {
    return absl::FailedPreconditionError("the model has no prompt prefix inputs");
  }
  if (ids.empty()) return absl::FailedPreconditionError("the prompt prefix has no tokens");
  TokenBatch batch;
  batch.Resize(1, static_cast<int64_t>(ids.size()), false);
  batch.input_ids = ids;
  std::fill(batch.attention_mask.begin(), batch.attention_mask.end(), 1);
  auto prefix = std::make_shared<PromptPrefix>();
  try {
    TIDE_RETURN_IF_ERROR(BindInputs(batch, nullptr));
    std::vector<const char*> names;
    for (const auto& slot : signature_.prompt_prefix) names.push_back(slot.output.c_str());
    std::vector<Ort::Value> outputs =
        session_.Run(run_options_, input_names_.data(), inputs_.data(), inputs_.size(), names.data(), names.size());
    for (size_t j = 0; j < outputs.size(); ++j) {
      auto info = outputs[j].GetTensorTypeAndShapeInfo();
      const std::vector<int64_t> want{1, batch.seq_len, signature_.prompt_prefix[j].width};
      if (info.GetShape() != want) {
        return absl::InternalError(absl::StrCat("model output \"", names[j], "\" has shape ", ShapeString(info.GetShape()),
                                                "; expected ", ShapeString(want)));
      }
      const float* data = outputs[j].GetTensorData<float>();
      prefix->values.emplace_back(data, data + info.GetElementCount());
    }
  } catch (const Ort::Exception& e) {
    return errors::Backend(absl::StrCat("onnxruntime Run (prompt prefix): ", e.what()));
  }
  prefix->ids = ids;
  return prefix;
}

absl::Status OrtBackend::RunImpl(Ort::Session& session, const TokenBatch& batch, Logits* out) {
  TIDE_RETURN_IF_ERROR(CheckBatch(batch));
  const PromptPrefix* prefix =
      prompt_prefix_ != nullptr && !batch.token_states ? prompt_prefix_->Used(batch) : nullptr;
  if (prefix != nullptr) CutPrefix(batch, prefix->length(), &after_prefix_);
  const TokenBatch& rows = prefix != nullptr ? after_prefix_ : batch;
  TIDE_RETURN_IF_ERROR(BindInputs(rows, prefix));
  if (prefix != nullptr) ++prefixed_runs_;
  const int64_t b = rows.batch, s = rows.seq_len;

  out->hidden = 0;
  out->token_states.clear();
  out->prompt_prefix_tokens = prefix != nullptr ? prefix->length() : 0;
  if (batch.token_states && !signature_.token_embeddings_name.empty()) return RunWithStates(session, b, s, out);
  if (signature_.num_labels > 0) {
    // Static label count: ONNX Runtime writes into the caller's buffer.
    out->batch = b;
    out->num_labels = signature_.num_labels;
    out->values.resize(static_cast<size_t>(b * signature_.num_labels));
    const std::array<int64_t, 2> out_shape{b, signature_.num_labels};
    Ort::Value output = Ort::Value::CreateTensor<float>(memory_info_, out->values.data(), out->values.size(),
                                                        out_shape.data(), out_shape.size());
    session.Run(run_options_, input_names_.data(), inputs_.data(), inputs_.size(), &output_name_, &output, 1);
    return absl::OkStatus();
  }
  std::vector<Ort::Value> outputs =
      session.Run(run_options_, input_names_.data(), inputs_.data(), inputs_.size(), &output_name_, 1);
  auto info = outputs[0].GetTensorTypeAndShapeInfo();
  const auto out_shape = info.GetShape();
  if (out_shape.size() != 2 || out_shape[0] != b) {
    return absl::InternalError(absl::StrCat("model output \"", signature_.logits_name, "\" has shape ",
                                            ShapeString(out_shape), " for a batch of ", b));
  }
  out->batch = b;
  out->num_labels = out_shape[1];
  const float* data = outputs[0].GetTensorData<float>();
  out->values.assign(data, data + info.GetElementCount());
  return absl::OkStatus();
}

absl::Status OrtBackend::RunWithStates(Ort::Session& session, int64_t b, int64_t s, Logits* out) {
  const std::array<const char*, 2> names{output_name_, signature_.token_embeddings_name.c_str()};
  std::vector<Ort::Value> outputs =
      session.Run(run_options_, input_names_.data(), inputs_.data(), inputs_.size(), names.data(), names.size());
  auto info = outputs[0].GetTensorTypeAndShapeInfo();
  const auto out_shape = info.GetShape();
  if (out_shape.size() != 2 || out_shape[0] != b) {
    return absl::InternalError(absl::StrCat("model output \"", signature_.logits_name, "\" has shape ",
                                            ShapeString(out_shape), " for a batch of ", b));
  }
  auto states_info = outputs[1].GetTensorTypeAndShapeInfo();
  const auto states_shape = states_info.GetShape();
  if (states_shape.size() != 3 || states_shape[0] != b || states_shape[1] != s || states_shape[2] < 1) {
    return absl::InternalError(absl::StrCat("model output \"", signature_.token_embeddings_name, "\" has shape ",
                                            ShapeString(states_shape), " for a batch of [", b, ", ", s, "]"));
  }
  out->batch = b;
  out->num_labels = out_shape[1];
  const float* data = outputs[0].GetTensorData<float>();
  out->values.assign(data, data + info.GetElementCount());
  out->hidden = states_shape[2];
  const float* states = outputs[1].GetTensorData<float>();
  out->token_states.assign(states, states + states_info.GetElementCount());
  return absl::OkStatus();
}

}  // namespace tide::runtime
