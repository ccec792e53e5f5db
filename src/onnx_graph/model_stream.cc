#include "onnx_graph/model_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "onnx_graph/model_io.h"

namespace tide::onnx_graph {
namespace {

// Field numbers of onnx.proto3 this reader walks; the rest is protobuf's.
constexpr uint32_t kModelGraph = 7;         // ModelProto.graph
constexpr uint32_t kGraphInitializer = 5;   // GraphProto.initializer
constexpr uint32_t kTensorRawData = 9;      // TensorProto.raw_data
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

// A file read with pread at any offset; closes it when done.
class File {
 public:
  explicit File(int fd) : fd_(fd) {}
  ~File() {
    if (fd_ >= 0) close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  int fd() const { return fd_; }

  // Exactly `n` bytes at `offset` into `dst`; false on a read error or a short file.
  bool ReadAt(uint64_t offset, uint64_t n, void* dst) const {
    char* out = static_cast<char*>(dst);
    while (n > 0) {
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, uint64_t{1} << 30));
      const ssize_t got = pread(fd_, out, chunk, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      out += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<uint64_t>(got);
    }
    return true;
  }

 private:
  int fd_;
};

// One protobuf field as found in the file: [start, end) is the whole field (tag included),
// [payload, end) a length-delimited field's bytes.
struct Field {
  uint32_t number = 0;
  int wire = 0;
  uint64_t start = 0;
  uint64_t payload = 0;
  uint64_t end = 0;
};

// Walks the fields of one message lying at [begin, end) of the file, through a small buffer.
class FieldReader {
 public:
  FieldReader(const File& file, uint64_t begin, uint64_t end) : file_(file), pos_(begin), end_(end) {}

  bool done() const { return pos_ >= end_; }

  // The next field, its payload skipped; false for a malformed or truncated field.
  bool Next(Field* f) {
    f->start = pos_;
    uint64_t tag = 0;
    if (!Varint(&tag) || tag > std::numeric_limits<uint32_t>::max()) return false;
    f->number = static_cast<uint32_t>(tag >> 3);
    f->wire = static_cast<int>(tag & 7);
    if (f->number == 0) return false;
    uint64_t skip = 0;
    switch (f->wire) {
      case kVarint: {
        uint64_t ignored = 0;
        if (!Varint(&ignored)) return false;
        break;
      }
      case kFixed64: skip = 8; break;
      case kFixed32: skip = 4; break;
      case kLengthDelimited:
        if (!Varint(&skip)) return false;
        break;
      default: return false;  // groups (3, 4) and reserved types: ONNX has none
    }
    if (skip > end_ - pos_) return false;
    f->payload = pos_;
    pos_ += skip;
    f->end = pos_;
    return true;
  }

 private:
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t byte = 0;
      if (!Byte(&byte)) return false;
      *v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;  // more than 10 bytes
  }

  bool Byte(uint8_t* b) {
    if (pos_ >= end_) return false;
    if (pos_ < buffer_start_ || pos_ >= buffer_start_ + buffer_size_) {
      const uint64_t n = std::min<uint64_t>(sizeof(buffer_), end_ - pos_);
      if (!file_.ReadAt(pos_, n, buffer_)) return false;
      buffer_start_ = pos_;
      buffer_size_ = n;
    }
    *b = static_cast<uint8_t>(buffer_[pos_ - buffer_start_]);
    ++pos_;
    return true;
  }

  const File& file_;
  uint64_t pos_;
  const uint64_t end_;
  char buffer_[4096];
  uint64_t buffer_start_ = 0;
  uint64_t buffer_size_ = 0;
};

class Streamer {
 public:
  Streamer(const File& file, std::string path, uint64_t min_bytes, const TensorSink& sink)
      : file_(file), path_(std::move(path)), min_bytes_(min_bytes), sink_(sink) {
    dir_ = std::filesystem::path(path_).parent_path().string();
  }

  absl::StatusOr<onnx::ModelProto> Read(uint64_t size) {
    std::string rest;  // every field of ModelProto but the graph
    onnx::GraphProto graph;
    bool has_graph = false;
    FieldReader r(file_, 0, size);
    while (!r.done()) {
      Field f;
      if (!r.Next(&f)) return Invalid();
      if (f.number == kModelGraph && f.wire == kLengthDelimited) {
        absl::StatusOr<onnx::GraphProto> part = ReadGraph(f.payload, f.end);
        if (!part.ok()) return part.status();
        graph.MergeFrom(*part);
        has_graph = true;
      } else if (!Append(f, &rest)) {
        return ReadError();
      }
    }
    onnx::ModelProto model;
    if (!model.ParseFromString(rest) || !has_graph) return Invalid();
    *model.mutable_graph() = std::move(graph);
    // Tensors the walk did not see (nodes' attributes, subgraphs): their external data inline.
    for (auto& n : *model.mutable_graph()->mutable_node()) {
      if (absl::Status s = InlineAttributes(&n); !s.ok()) return s;
    }
    return model;
  }

 private:
  absl::StatusOr<onnx::GraphProto> ReadGraph(uint64_t begin, uint64_t end) {
    std::string rest;  // every field of GraphProto but the initializers
    std::vector<onnx::TensorProto> initializers;
    FieldReader r(file_, begin, end);
    while (!r.done()) {
      Field f;
      if (!r.Next(&f)) return Invalid();
      if (f.number == kGraphInitializer && f.wire == kLengthDelimited) {
        absl::StatusOr<onnx::TensorProto> t = ReadInitializer(f.payload, f.end);
        if (!t.ok()) return t.status();
        initializers.push_back(*std::move(t));
      } else if (!Append(f, &rest)) {
        return ReadError();
      }
    }
    onnx::GraphProto g;
    if (!g.ParseFromString(rest)) return Invalid();
    for (auto& t : initializers) *g.add_initializer() = std::move(t);
    return g;
  }

  // One initializer, its bytes given to the sink when large enough.
  absl::StatusOr<onnx::TensorProto> ReadInitializer(uint64_t begin, uint64_t end) {
    std::string header;  // every field but raw_data
    bool has_raw = false;
    uint64_t raw_offset = 0, raw_size = 0;
    FieldReader r(file_, begin, end);
    while (!r.done()) {
      Field f;
      if (!r.Next(&f)) return Invalid();
      if (f.number == kTensorRawData && f.wire == kLengthDelimited) {
        has_raw = true;  // repeated: the last one wins, as in protobuf
        raw_offset = f.payload;
        raw_size = f.end - f.payload;
      } else if (!Append(f, &header)) {
        return ReadError();
      }
    }
    onnx::TensorProto t;
    if (!t.ParseFromString(header)) return Invalid();
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      absl::StatusOr<ExternalRange> range = ResolveExternalData(t, dir_);
      if (!range.ok()) return range.status();
      const int fd = open(range->file.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return absl::NotFoundError(absl::StrCat("initializer ", t.name(), ": cannot open external data ", range->file));
      File data(fd);
      if (absl::Status s = Take(&t, data, range->offset, range->length); !s.ok()) return s;
      return t;
    }
    if (has_raw) {
      if (absl::Status s = Take(&t, file_, raw_offset, raw_size); !s.ok()) return s;
    }
    return t;
  }

  // Gives `size` bytes at `offset` of `source` to the sink (or, when it declines or they are
  // small, to t's raw_data). An external tensor no longer refers to its file.
  absl::Status Take(onnx::TensorProto* t, const File& source, uint64_t offset, uint64_t size) {
    if (t->data_location() == onnx::TensorProto::EXTERNAL) {
      t->clear_external_data();
      t->set_data_location(onnx::TensorProto::DEFAULT);
    }
    if (size >= min_bytes_) {
      absl::StatusOr<TensorDestination> dst = sink_(t, size);
      if (!dst.ok()) return dst.status();
      if (dst->skip) return absl::OkStatus();
      if (dst->fd >= 0) return CopyToFile(source, offset, size, *dst, t->name());
      if (dst->memory != nullptr) {
        return source.ReadAt(offset, size, dst->memory) ? absl::OkStatus() : ReadError(t->name());
      }
    }
    if (size > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": initializer ", t->name(), " has ", size,
                                                     " bytes, more than a tensor kept in the graph can hold"));
    }
    std::string bytes(static_cast<size_t>(size), '\0');
    if (!source.ReadAt(offset, size, bytes.data())) return ReadError(t->name());
    t->set_raw_data(std::move(bytes));
    return absl::OkStatus();
  }

  // File to file: in the kernel when it can (copy_file_range), else through one small buffer.
  absl::Status CopyToFile(const File& source, uint64_t offset, uint64_t size, const TensorDestination& dst,
                          const std::string& name) {
    loff_t in = static_cast<loff_t>(offset), out = static_cast<loff_t>(dst.offset);
    uint64_t left = size;
    while (left > 0) {
      const ssize_t n = copy_file_range(source.fd(), &in, dst.fd, &out,
                                        static_cast<size_t>(std::min<uint64_t>(left, uint64_t{1} << 30)), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // not supported here (another file system, an old kernel), or a short file
      left -= static_cast<uint64_t>(n);
    }
    std::vector<char> buffer;
    while (left > 0) {
      if (buffer.empty()) buffer.resize(size_t{1} << 20);
      const uint64_t chunk = std::min<uint64_t>(left, buffer.size());
      if (!source.ReadAt(static_cast<uint64_t>(in), chunk, buffer.data())) return ReadError(name);
      for (uint64_t done = 0; done < chunk;) {
        const ssize_t w = pwrite(dst.fd, buffer.data() + done, static_cast<size_t>(chunk - done), out + static_cast<loff_t>(done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return absl::InternalError(absl::StrCat("initializer ", name, ": cannot write its bytes: ", std::strerror(errno)));
        done += static_cast<uint64_t>(w);
      }
      in += static_cast<loff_t>(chunk);
      out += static_cast<loff_t>(chunk);
      left -= chunk;
    }
    return absl::OkStatus();
  }

  absl::Status ReadExternal(const ExternalRange& range, void* dst, const std::string& name) {
    const int fd = open(range.file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::NotFoundError(absl::StrCat("initializer ", name, ": cannot open external data ", range.file));
    File data(fd);
    if (!data.ReadAt(range.offset, range.length, dst)) {
      return absl::InternalError(absl::StrCat("initializer ", name, ": error reading external data ", range.file));
    }
    return absl::OkStatus();
  }

  absl::Status InlineAttributes(onnx::NodeProto* n) {
    for (auto& a : *n->mutable_attribute()) {
      if (a.has_t()) {
        if (absl::Status s = InlineTensor(a.mutable_t()); !s.ok()) return s;
      }
      for (auto& t : *a.mutable_tensors()) {
        if (absl::Status s = InlineTensor(&t); !s.ok()) return s;
      }
      if (a.has_g()) {
        if (absl::Status s = InlineGraph(a.mutable_g()); !s.ok()) return s;
      }
      for (auto& g : *a.mutable_graphs()) {
        if (absl::Status s = InlineGraph(&g); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  absl::Status InlineGraph(onnx::GraphProto* g) {
    for (auto& t : *g->mutable_initializer()) {
      if (absl::Status s = InlineTensor(&t); !s.ok()) return s;
    }
    for (auto& n : *g->mutable_node()) {
      if (absl::Status s = InlineAttributes(&n); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status InlineTensor(onnx::TensorProto* t) {
    if (t->data_location() != onnx::TensorProto::EXTERNAL) return absl::OkStatus();
    absl::StatusOr<ExternalRange> range = ResolveExternalData(*t, dir_);
    if (!range.ok()) return range.status();
    if (range->length > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": tensor ", t->name(), " is too large for a node attribute"));
    }
    std::string bytes(static_cast<size_t>(range->length), '\0');
    if (absl::Status s = ReadExternal(*range, bytes.data(), t->name()); !s.ok()) return s;
    t->clear_external_data();
    t->set_data_location(onnx::TensorProto::DEFAULT);
    t->set_raw_data(std::move(bytes));
    return absl::OkStatus();
  }

  // Appends the field's bytes as they are in the file (tag included).
  bool Append(const Field& f, std::string* out) const {
    const size_t at = out->size();
    out->resize(at + static_cast<size_t>(f.end - f.start));
    return file_.ReadAt(f.start, f.end - f.start, out->data() + at);
  }

  absl::Status Invalid() const { return absl::InvalidArgumentError(absl::StrCat(path_, ": not a valid ONNX model")); }
  absl::Status ReadError() const { return absl::InternalError(absl::StrCat("error reading ", path_)); }
  absl::Status ReadError(const std::string& tensor) const {
    return absl::InternalError(absl::StrCat("error reading ", path_, " (or its external data): initializer ", tensor));
  }

  const File& file_;
  const std::string path_;
  std::string dir_;
  const uint64_t min_bytes_;
  const TensorSink& sink_;
};

}  // namespace

absl::StatusOr<onnx::ModelProto> StreamModelFile(const std::string& path, uint64_t min_bytes, const TensorSink& sink) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  File file(fd);
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  Streamer streamer(file, path, std::max<uint64_t>(min_bytes, 1), sink);
  return streamer.Read(static_cast<uint64_t>(st.st_size));
}

}  // namespace tide::onnx_graph
