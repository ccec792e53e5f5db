#include "runtime/shared_weights.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"

#ifdef TIDE_HAVE_ONNX_PROTO
#include "onnx/onnx_pb.h"
#include "onnx_graph/graph_util.h"
#include "onnx_graph/model_io.h"
#include "onnx_graph/model_stream.h"
#endif

namespace tide::runtime {
namespace {

std::string ModelKey(const std::string& model_path, const std::string& model_data) {
  if (!model_path.empty()) return absl::StrCat("path:", model_path);
  return absl::StrCat("data:", model_data.size(), ":", std::hash<std::string_view>{}(model_data));
}

#ifdef TIDE_HAVE_ONNX_PROTO
using onnx_graph::ElementSize;

// An anonymous, page-aligned mapping of `size` bytes (returned to the system when the last owner
// drops it, instead of staying in the heap).
absl::StatusOr<std::shared_ptr<void>> MapAnonymous(size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return absl::ResourceExhaustedError(absl::StrCat("shared weights: cannot map ", size, " bytes"));
  return std::shared_ptr<void>(p, [size](void* q) { munmap(q, size); });
}

// The bytes of an initializer stored as external data beside the model (`model_dir`), read into
// a mapping of `size` bytes. Null (not shared: ONNX Runtime then loads the tensor itself and
// reports any error in its own words) when the reference is not one onnx_graph::ResolveExternalData
// accepts (a location that is absolute or leaves the model's folder, a range outside the file) or
// its length is not the tensor's size.
std::shared_ptr<void> ReadExternal(const onnx::TensorProto& t, const std::string& model_dir, size_t size,
                                   const std::function<absl::StatusOr<std::shared_ptr<void>>(size_t)>& allocate) {
  absl::StatusOr<onnx_graph::ExternalRange> range = onnx_graph::ResolveExternalData(t, model_dir);
  if (!range.ok() || range->length != size) return nullptr;
  const int fd = open(range->file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  std::shared_ptr<void> buffer;
  if (absl::StatusOr<std::shared_ptr<void>> mapped = allocate(size); mapped.ok()) {
    size_t done = 0;
    while (done < size) {
      const ssize_t n = pread(fd, static_cast<char*>(mapped->get()) + done, size - done,
                              static_cast<off_t>(range->offset + done));
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    if (done == size) buffer = *std::move(mapped);
  }
  close(fd);
  return buffer;
}

// Where one entry's tensors go while it is built: its weights file, else (none, or the disk is
// full) anonymous memory. Bytes written through the mappings leave the process every
// kReleaseEvery bytes, so building an entry holds about that much of it at a time (TakeFromFile
// writes with write(2) and holds none).
class EntryWriter {
 public:
  static constexpr size_t kReleaseEvery = size_t{32} << 20;

  explicit EntryWriter(SharedModelWeights* out)
      : out_(out), cpu_(Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault)) {}

  // `fd`, `offset` (optional): where the bytes lie in the file, to write them there with write(2)
  // (never resident in the process); fd -1 for anonymous memory.
  absl::StatusOr<std::shared_ptr<void>> Allocate(size_t size, int* fd = nullptr, uint64_t* offset = nullptr) {
    if (since_release_ >= kReleaseEvery) {
      out_->ReleaseResident();
      since_release_ = 0;
    }
    since_release_ += size;
    if (fd != nullptr) *fd = -1;
    if (out_->file != nullptr) {
      absl::StatusOr<std::shared_ptr<void>> in_file = out_->file->Allocate(size, offset);
      if (in_file.ok() && fd != nullptr) *fd = out_->file->fd();
      if (in_file.ok()) return in_file;
      if (out_->file_error.empty()) out_->file_error = absl::StrCat(in_file.status().message(), " (the rest in memory)");
    }
    return MapAnonymous(size);
  }

  // Adds the tensor `t` (its name, dims and type) over `size` bytes at `buffer` to the entry.
  void Add(const onnx::TensorProto& t, std::shared_ptr<void> buffer, size_t size) {
    std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
    out_->names.push_back(t.name());
    out_->values.push_back(Ort::Value::CreateTensor(cpu_, buffer.get(), size, shape.data(), shape.size(),
                                                    static_cast<ONNXTensorElementDataType>(t.data_type())));
    out_->buffers.push_back(std::move(buffer));
    out_->bytes += size;
  }

  // Every tensor is written: the file is sealed and its pages leave the process (the sessions
  // read them back as they pre-pack).
  void Finish() {
    if (out_->file != nullptr) out_->file->Seal();
    out_->ReleaseResident();
  }

 private:
  SharedModelWeights* out_;
  const Ort::MemoryInfo cpu_;
  size_t since_release_ = 0;
};

// The bytes a shareable tensor holds (dense numeric type, named, dims >= 0), else 0.
size_t ShareableSize(const onnx::TensorProto& t) {
  return t.name().empty() ? 0 : static_cast<size_t>(onnx_graph::DenseTensorBytes(t));
}

// `path` streamed (onnx_graph::StreamModelFile) with `sink` choosing where each large tensor goes,
// the rest serialized into `skeleton`.
absl::Status StreamSkeleton(const std::string& path, size_t inline_below, const onnx_graph::TensorSink& sink,
                            std::string* skeleton) {
  absl::StatusOr<onnx::ModelProto> model = onnx_graph::StreamModelFile(path, inline_below, sink);
  if (!model.ok()) return model.status();
  if (!model->SerializeToString(skeleton)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the graph without its weights is over 2 GB"));
  }
  return absl::OkStatus();
}

// `t`'s bytes now live in a shared entry: the tensor points at the placeholder file instead.
void MakePlaceholder(onnx::TensorProto* t, size_t size) {
  t->clear_raw_data();
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  t->clear_external_data();
  auto* location = t->add_external_data();
  location->set_key("location");
  location->set_value(SharedWeights::kPlaceholderLocation);
  auto* length = t->add_external_data();
  length->set_key("length");
  length->set_value(std::to_string(size));
}

bool IsPlaceholder(const onnx::TensorProto& t) {
  if (t.data_location() != onnx::TensorProto::EXTERNAL) return false;
  for (const auto& e : t.external_data()) {
    if (e.key() == "location") return e.value() == SharedWeights::kPlaceholderLocation;
  }
  return false;
}

// Moves every shareable initializer of `model` into `out`; with `placeholders`, the tensor in
// `model` then points at SharedWeights::kPlaceholderLocation instead of holding no data.
// `model_dir`: the folder of the model's file, where its external data lies (empty: a model in
// memory, whose external initializers are not shared). `base`: the entry whose tensors the
// placeholders already in `model` name (see TakeFromModel).
absl::Status Take(onnx::ModelProto& model, bool placeholders, const std::string& model_dir,
                  const SharedModelWeights* base, SharedModelWeights* out) {
  EntryWriter writer(out);
  std::unordered_map<std::string, size_t> in_base;
  if (base != nullptr) {
    for (size_t i = 0; i < base->names.size(); ++i) in_base.emplace(base->names[i], i);
    out->base_file = base->file;
  }
  auto* initializers = model.mutable_graph()->mutable_initializer();
  out->names.reserve(initializers->size());
  out->buffers.reserve(initializers->size());
  out->values.reserve(initializers->size());
  for (onnx::TensorProto& t : *initializers) {
    if (base != nullptr && IsPlaceholder(t)) {
      auto it = in_base.find(t.name());
      const size_t size = ShareableSize(t);
      if (it == in_base.end() || size == 0 ||
          base->values[it->second].GetTensorTypeAndShapeInfo().GetElementCount() * ElementSize(t.data_type()) != size) {
        return absl::FailedPreconditionError(
            absl::StrCat("shared weights: the rewritten graph names a weight the original does not hold: ", t.name()));
      }
      writer.Add(t, base->buffers[it->second], size);
      continue;
    }
    const size_t size = ShareableSize(t);
    if (size < SharedWeights::kMinSharedBytes) continue;
    std::shared_ptr<void> buffer;
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      // Weights beside the model (exporters write them so past 2 GB): read once into the entry;
      // ONNX Runtime then never loads them for a session given the entry.
      if (placeholders || model_dir.empty()) continue;
      buffer = ReadExternal(t, model_dir, size, [&writer](size_t n) { return writer.Allocate(n); });
      if (buffer == nullptr) continue;
    } else {
      if (!t.has_raw_data() || t.raw_data().size() != size) continue;  // malformed: ONNX Runtime reports it
      absl::StatusOr<std::shared_ptr<void>> mapped = writer.Allocate(size);
      if (!mapped.ok()) return mapped.status();
      buffer = *std::move(mapped);
      std::memcpy(buffer.get(), t.raw_data().data(), size);
      // Frees the parsed copy now (clear_raw_data() would keep the string's capacity until the
      // whole model is destroyed: the load would peak at two copies of the weights).
      std::string().swap(*t.mutable_raw_data());
    }
    writer.Add(t, std::move(buffer), size);
    if (placeholders) MakePlaceholder(&t, size);
  }
  writer.Finish();
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
  std::string model_dir;  // empty for a model in memory: its external initializers are not shared
  if (!model_path.empty()) {
    model_dir = std::filesystem::path(model_path).parent_path().string();
    if (model_dir.empty()) model_dir = ".";
  }
  return Take(*read, /*placeholders=*/false, model_dir, /*base=*/nullptr, out);
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
    entry = NewEntry();
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

absl::StatusOr<std::shared_ptr<SharedModelWeights>> SharedWeights::TakeFromModel(onnx::ModelProto* model,
                                                                                 const SharedModelWeights* base) const {
#ifdef TIDE_HAVE_ONNX_PROTO
  try {
    auto entry = NewEntry();
    absl::Status s = Take(*model, /*placeholders=*/true, std::string(), base, entry.get());
    malloc_trim(0);
    if (!s.ok()) return s;
    return entry;
  } catch (const Ort::Exception& e) {
    return absl::InternalError(absl::StrCat("shared weights: ", e.what()));
  }
#else
  (void)model;
  (void)base;
  return std::shared_ptr<SharedModelWeights>();
#endif
}

absl::StatusOr<SharedWeights::TakenModel> SharedWeights::TakeFromFile(const std::string& model_path,
                                                                      size_t inline_below) const {
  TakenModel taken;
#ifdef TIDE_HAVE_ONNX_PROTO
  try {
    taken.weights = NewEntry();
    EntryWriter writer(taken.weights.get());
    // Called for each large initializer in file order, before its bytes are read into the
    // returned buffer: the entry holds the tensor over them, the graph a placeholder.
    // Written into the file with write(2), not through the mapping: the load never holds them.
    auto sink = [&writer](onnx::TensorProto* t, uint64_t bytes) -> absl::StatusOr<onnx_graph::TensorDestination> {
      onnx_graph::TensorDestination dst;
      const size_t size = ShareableSize(*t);
      if (size == 0 || size != bytes) return dst;  // a string tensor, or malformed: ONNX Runtime says
      absl::StatusOr<std::shared_ptr<void>> buffer = writer.Allocate(size, &dst.fd, &dst.offset);
      if (!buffer.ok()) return buffer.status();
      if (dst.fd < 0) dst.memory = buffer->get();
      writer.Add(*t, *std::move(buffer), size);
      MakePlaceholder(t, size);
      return dst;
    };
    if (absl::Status s = StreamSkeleton(model_path, inline_below, sink, &taken.skeleton); !s.ok()) return s;
    writer.Finish();
  } catch (const Ort::Exception& e) {
    return absl::InternalError(absl::StrCat("shared weights: ", e.what()));
  }
  malloc_trim(0);
#else
  (void)model_path;
  (void)inline_below;
#endif
  return taken;
}

std::shared_ptr<SharedModelWeights> SharedWeights::NewEntry() const {
  auto entry = std::make_shared<SharedModelWeights>();
  if (weights_dir_.empty()) return entry;
  absl::StatusOr<std::unique_ptr<WeightFile>> file = WeightFile::Open(weights_dir_);
  if (file.ok()) {
    entry->file = *std::move(file);
  } else {
    entry->file_error = std::string(file.status().message());
  }
  return entry;
}

absl::StatusOr<SharedWeights::TakenModel> SharedWeights::ShapesOnly(const std::string& model_path,
                                                                    size_t inline_below) {
  TakenModel taken;
#ifdef TIDE_HAVE_ONNX_PROTO
  struct Shape {
    onnx::TensorProto tensor;  // name, dims, type
    size_t size;
  };
  std::vector<Shape> shapes;
  size_t largest = 0;
  auto sink = [&](onnx::TensorProto* t, uint64_t bytes) -> absl::StatusOr<onnx_graph::TensorDestination> {
    const size_t size = ShareableSize(*t);
    if (size == 0 || size != bytes) return onnx_graph::TensorDestination{};  // kept whole: ONNX Runtime judges it
    shapes.push_back(Shape{*t, size});
    largest = std::max(largest, size);
    MakePlaceholder(t, size);
    return onnx_graph::TensorDestination{.skip = true};
  };
  if (absl::Status s = StreamSkeleton(model_path, inline_below, sink, &taken.skeleton); !s.ok()) return s;
  try {
    taken.weights = std::make_shared<SharedModelWeights>();
    if (!shapes.empty()) {
      void* p = mmap(nullptr, largest, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) return absl::ResourceExhaustedError(absl::StrCat("shared weights: cannot map ", largest, " bytes"));
      std::shared_ptr<void> zeros(p, [largest](void* q) { munmap(q, largest); });
      EntryWriter writer(taken.weights.get());
      for (const Shape& s : shapes) writer.Add(s.tensor, zeros, s.size);
    }
  } catch (const Ort::Exception& e) {
    return absl::InternalError(absl::StrCat("shared weights: ", e.what()));
  }
#else
  (void)model_path;
  (void)inline_below;
#endif
  return taken;
}

size_t SharedModelWeights::ReleaseResident() const {
  size_t released = file != nullptr ? file->Release() : 0;
  if (base_file != nullptr && base_file != file) released += base_file->Release();
  return released;
}

void SharedWeights::Adopt(const std::string& model_path, const std::string& model_data,
                          std::shared_ptr<SharedModelWeights> entry) {
  absl::MutexLock lock(&mu_);
  models_[ModelKey(model_path, model_data)] = entry;
}

}  // namespace tide::runtime
