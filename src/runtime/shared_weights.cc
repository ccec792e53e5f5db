#include "runtime/shared_weights.h"

#include <malloc.h>
#include <sys/mman.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"

#ifdef TIDE_HAVE_ONNX_PROTO
#include "onnx/onnx_pb.h"
#include "onnx_graph/model_io.h"
#endif

namespace tide::runtime {
namespace {

std::string ModelKey(const std::string& model_path, const std::string& model_data) {
  if (!model_path.empty()) return absl::StrCat("path:", model_path);
  return absl::StrCat("data:", model_data.size(), ":", std::hash<std::string_view>{}(model_data));
}

#ifdef TIDE_HAVE_ONNX_PROTO
size_t ElementSize(int32_t type) {
  switch (type) {
    case onnx::TensorProto::FLOAT: case onnx::TensorProto::INT32: case onnx::TensorProto::UINT32: return 4;
    case onnx::TensorProto::INT8: case onnx::TensorProto::UINT8: case onnx::TensorProto::BOOL: return 1;
    case onnx::TensorProto::FLOAT16: case onnx::TensorProto::BFLOAT16: case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16: return 2;
    case onnx::TensorProto::INT64: case onnx::TensorProto::UINT64: case onnx::TensorProto::DOUBLE: return 8;
    default: return 0;  // strings, 4-bit and complex types: not shared
  }
}

// Moves every shareable initializer of `model` into `out`; with `placeholders`, the tensor in
// `model` then points at SharedWeights::kPlaceholderLocation instead of holding no data.
absl::Status Take(onnx::ModelProto& model, bool placeholders, SharedModelWeights* out) {
  const Ort::MemoryInfo cpu = Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault);
  auto* initializers = model.mutable_graph()->mutable_initializer();
  out->names.reserve(initializers->size());
  out->buffers.reserve(initializers->size());
  out->values.reserve(initializers->size());
  for (onnx::TensorProto& t : *initializers) {
    const size_t elem = ElementSize(t.data_type());
    if (elem == 0 || !t.has_raw_data() || t.raw_data().size() < SharedWeights::kMinSharedBytes ||
        t.data_location() == onnx::TensorProto::EXTERNAL || t.name().empty()) {
      continue;
    }
    size_t count = 1;
    std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
    for (int64_t d : shape) count *= static_cast<size_t>(d < 0 ? 0 : d);
    if (count * elem != t.raw_data().size()) continue;  // malformed: let ONNX Runtime report it
    const size_t size = t.raw_data().size();
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return absl::ResourceExhaustedError(absl::StrCat("shared weights: cannot map ", size, " bytes"));
    std::shared_ptr<void> buffer(p, [size](void* q) { munmap(q, size); });
    std::memcpy(p, t.raw_data().data(), size);
    // Frees the parsed copy now (clear_raw_data() would keep the string's capacity until the whole
    // model is destroyed: the load would peak at two copies of the weights).
    std::string().swap(*t.mutable_raw_data());
    if (placeholders) {
      t.clear_raw_data();
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      t.clear_external_data();
      auto* location = t.add_external_data();
      location->set_key("location");
      location->set_value(SharedWeights::kPlaceholderLocation);
      auto* length = t.add_external_data();
      length->set_key("length");
      length->set_value(std::to_string(size));
    }
    out->names.push_back(t.name());
    out->values.push_back(Ort::Value::CreateTensor(cpu, p, size, shape.data(), shape.size(),
                                                   static_cast<ONNXTensorElementDataType>(t.data_type())));
    out->buffers.push_back(std::move(buffer));
    out->bytes += size;
  }
  return absl::OkStatus();
}

absl::Status Load(const std::string& model_path, const std::string& model_data, SharedModelWeights* out) {
  absl::StatusOr<onnx::ModelProto> read =
      model_path.empty() ? onnx_graph::ParseModel(model_data) : onnx_graph::ReadModelFile(model_path);
  if (!read.ok()) {
    const std::string label = model_path.empty() ? std::string("<in-memory model>") : model_path;
    if (read.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError(absl::StrCat(label, ": cannot read the model for shared weights"));
    }
    return absl::FailedPreconditionError(absl::StrCat(label, ": not an ONNX model (shared weights)"));
  }
  return Take(*read, /*placeholders=*/false, out);
}
#endif

}  // namespace

bool SharedWeights::Available() {
#ifdef TIDE_HAVE_ONNX_PROTO
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::shared_ptr<SharedModelWeights>> SharedWeights::ForModel(const std::string& model_path,
                                                                            const std::string& model_data) {
#ifdef TIDE_HAVE_ONNX_PROTO
  const std::string key = ModelKey(model_path, model_data);
  absl::MutexLock lock(&mu_);
  for (auto it = models_.begin(); it != models_.end();) {  // forget dead entries
    it = it->second.expired() ? models_.erase(it) : std::next(it);
  }
  if (auto it = models_.find(key); it != models_.end()) {
    if (auto live = it->second.lock()) return live;
  }
  std::shared_ptr<SharedModelWeights> entry;
  try {
    entry = std::make_shared<SharedModelWeights>();
    absl::Status s = Load(model_path, model_data, entry.get());
    malloc_trim(0);  // the parsed model is gone: give its pages back
    if (!s.ok()) return s;
  } catch (const Ort::Exception& e) {
    return absl::InternalError(absl::StrCat("shared weights: ", e.what()));
  }
  models_[key] = entry;
  return entry;
#else
  (void)model_path;
  (void)model_data;
  return std::shared_ptr<SharedModelWeights>();
#endif
}

absl::StatusOr<std::shared_ptr<SharedModelWeights>> SharedWeights::TakeFromModel(onnx::ModelProto* model) {
#ifdef TIDE_HAVE_ONNX_PROTO
  try {
    auto entry = std::make_shared<SharedModelWeights>();
    absl::Status s = Take(*model, /*placeholders=*/true, entry.get());
    malloc_trim(0);
    if (!s.ok()) return s;
    return entry;
  } catch (const Ort::Exception& e) {
    return absl::InternalError(absl::StrCat("shared weights: ", e.what()));
  }
#else
  (void)model;
  return std::shared_ptr<SharedModelWeights>();
#endif
}

void SharedWeights::Adopt(const std::string& model_path, const std::string& model_data,
                          std::shared_ptr<SharedModelWeights> entry) {
  absl::MutexLock lock(&mu_);
  models_[ModelKey(model_path, model_data)] = entry;
}

}  // namespace tide::runtime
