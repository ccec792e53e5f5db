#include "onnx_graph/model_io.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "onnx_graph/graph_util.h"

namespace tide::onnx_graph {
namespace {

namespace fs = std::filesystem;

// Protobuf refuses messages over 2 GB; leave headroom for the graph itself.
constexpr int64_t kSingleFileLimit = int64_t{1800} * 1024 * 1024;

void CollectTensors(onnx::GraphProto* g, std::vector<onnx::TensorProto*>* out) {
  for (auto& t : *g->mutable_initializer()) out->push_back(&t);
  for (auto& n : *g->mutable_node()) {
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_t()) out->push_back(a.mutable_t());
      if (a.has_g()) CollectTensors(a.mutable_g(), out);
      for (auto& sg : *a.mutable_graphs()) CollectTensors(&sg, out);
    }
  }
}

absl::Status InlineExternal(onnx::TensorProto* t, const fs::path& dir) {
  absl::StatusOr<ExternalRange> range = ResolveExternalData(*t, dir.string());
  if (!range.ok()) return range.status();
  const std::string& location = range->file;
  const int64_t offset = static_cast<int64_t>(range->offset);
  const int64_t length = static_cast<int64_t>(range->length);
  std::ifstream in(location, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("initializer ", t->name(), ": cannot open external data ", location));
  std::string data(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(data.data(), length);
  if (!in) return absl::InternalError(absl::StrCat("error reading ", location));
  t->set_raw_data(std::move(data));
  t->clear_external_data();
  t->set_data_location(onnx::TensorProto::DEFAULT);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExternalRange> ResolveExternalData(const onnx::TensorProto& t, const std::string& model_dir) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& e : t.external_data()) {
    try {
      if (e.key() == "location") location = e.value();
      else if (e.key() == "offset") offset = std::stoll(e.value());
      else if (e.key() == "length") length = std::stoll(e.value());
    } catch (const std::exception&) {
      return absl::InvalidArgumentError(absl::StrCat("initializer ", t.name(), ": bad external_data ", e.key()));
    }
  }
  fs::path rel(location);
  if (location.empty() || rel.is_absolute() || rel.has_root_path()) {
    return absl::InvalidArgumentError(
        absl::StrCat("initializer ", t.name(), ": external data location '", location, "' must be a relative file name"));
  }
  for (const auto& part : rel) {
    if (part == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("initializer ", t.name(), ": external data location '", location, "' leaves the model folder"));
    }
  }
  if (offset < 0) return absl::InvalidArgumentError(absl::StrCat("initializer ", t.name(), ": negative offset"));
  const fs::path file = fs::path(model_dir) / rel;
  std::error_code ec;
  const bool regular = fs::is_regular_file(file, ec);
  const auto file_size = regular ? fs::file_size(file, ec) : 0;
  if (!regular || ec) {
    return absl::NotFoundError(absl::StrCat("initializer ", t.name(), ": cannot open external data ", file.string()));
  }
  const int64_t size = static_cast<int64_t>(file_size);
  // No length: the tensor's own size (what ONNX Runtime reads), else the rest of the file.
  if (length < 0 && DenseTensorBytes(t) > 0) length = static_cast<int64_t>(DenseTensorBytes(t));
  if (offset <= size && length < 0) length = size - offset;
  if (offset > size || length < 0 || length > size - offset) {
    return absl::InvalidArgumentError(absl::StrCat("initializer ", t.name(), ": external data ", location, " is truncated (wants ",
                                                   offset + length, " bytes, file has ", size, ")"));
  }
  return ExternalRange{file.string(), static_cast<uint64_t>(offset), static_cast<uint64_t>(length)};
}

absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  // One string of the file's size: no stream buffer growing by doubling, no second copy (a
  // model file can be a gigabyte).
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  const std::streamoff size = in.tellg();
  if (size < 0) return absl::InternalError(absl::StrCat("error reading ", path));
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), size)) return absl::InternalError(absl::StrCat("error reading ", path));
  return bytes;
}

absl::StatusOr<onnx::ModelProto> ParseModel(const std::string& bytes) {
  onnx::ModelProto model;
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(std::min<size_t>(bytes.size(), std::numeric_limits<int>::max())));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(std::numeric_limits<int>::max());
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) || !model.ParseFromCodedStream(&coded) ||
      !coded.ConsumedEntireMessage()) {
    return absl::InvalidArgumentError("not a valid ONNX model (protobuf parse failed)");
  }
  if (!model.has_graph()) return absl::InvalidArgumentError("ONNX model has no graph");
  return model;
}

absl::StatusOr<onnx::ModelProto> ReadModelFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  onnx::ModelProto model;
  google::protobuf::io::IstreamInputStream raw(&in);
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(std::numeric_limits<int>::max());
  if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage() || !model.has_graph()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a valid ONNX model"));
  }
  return model;
}

absl::StatusOr<onnx::ModelProto> LoadModel(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<onnx::ModelProto> model = ParseModel(*bytes);
  if (!model.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", model.status().message()));
  std::vector<onnx::TensorProto*> tensors;
  CollectTensors(model->mutable_graph(), &tensors);
  const fs::path dir = fs::path(path).parent_path();
  for (onnx::TensorProto* t : tensors) {
    if (t->data_location() != onnx::TensorProto::EXTERNAL) continue;
    if (absl::Status s = InlineExternal(t, dir); !s.ok()) return s;
  }
  return model;
}

absl::Status SaveModel(onnx::ModelProto& model, const std::string& path, const SaveOptions& options) {
  const int64_t size = static_cast<int64_t>(model.ByteSizeLong());
  bool external = options.external_data == ExternalData::kAlways ||
                  (options.external_data == ExternalData::kAuto && size > kSingleFileLimit);
  if (!external && size > kSingleFileLimit) {
    return absl::FailedPreconditionError(
        absl::StrCat("model is ", size, " bytes, over protobuf's 2 GB limit; save with external data"));
  }
  if (external) {
    const fs::path out(path);
    const std::string data_name = out.filename().string() + ".data";
    std::ofstream data(out.parent_path() / data_name, std::ios::binary | std::ios::trunc);
    if (!data) return absl::InternalError(absl::StrCat("cannot write ", (out.parent_path() / data_name).string()));
    int64_t offset = 0;
    for (auto& t : *model.mutable_graph()->mutable_initializer()) {
      if (!t.has_raw_data() || static_cast<int64_t>(t.raw_data().size()) < options.external_threshold_bytes) continue;
      // ONNX Runtime maps external data; align each tensor to 4 KiB like ONNX's own writer.
      const int64_t aligned = (offset + 4095) / 4096 * 4096;
      if (aligned > offset) {
        std::string pad(static_cast<size_t>(aligned - offset), '\0');
        data.write(pad.data(), static_cast<std::streamsize>(pad.size()));
        offset = aligned;
      }
      const std::string& raw = t.raw_data();
      data.write(raw.data(), static_cast<std::streamsize>(raw.size()));
      auto add = [&](const std::string& k, const std::string& v) {
        auto* e = t.add_external_data();
        e->set_key(k);
        e->set_value(v);
      };
      add("location", data_name);
      add("offset", std::to_string(offset));
      add("length", std::to_string(raw.size()));
      offset += static_cast<int64_t>(raw.size());
      t.clear_raw_data();
      t.set_data_location(onnx::TensorProto::EXTERNAL);
    }
    if (!data.flush()) return absl::InternalError(absl::StrCat("error writing ", data_name));
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", path));
  if (!model.SerializeToOstream(&f) || !f.flush()) return absl::InternalError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

}  // namespace tide::onnx_graph
