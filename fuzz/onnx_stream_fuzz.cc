// libFuzzer target for the streaming .onnx reader (onnx_graph::StreamModelFile), which walks the
// protobuf wire format of an untrusted model file itself (`tide serve --model` reads the model of a
// downloaded folder): any input must give a model or an error, never a crash, hang, leak or a
// read outside the file; a model read refers to no external file any more.
// Build: cmake -DTIDE_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++; seeds: fuzz/corpus/onnx_stream.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "onnx_graph/model_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The input as a file of its own (a memfd), read as the server reads a model file. External
  // references resolve in its folder, /proc/self/fd: the memfd itself or another open file.
  const int fd = memfd_create("model.onnx", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (size > 0 && write(fd, data, size) != static_cast<ssize_t>(size)) {
    close(fd);
    return 0;
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const int out = memfd_create("weights", MFD_CLOEXEC);  // where a file destination writes
  if (out < 0) {
    close(fd);
    return 0;
  }
  std::vector<std::vector<char>> taken;
  using tide::onnx_graph::TensorDestination;
  auto sink = [&](onnx::TensorProto* t, uint64_t bytes) -> absl::StatusOr<TensorDestination> {
    if (bytes > (uint64_t{64} << 20)) return TensorDestination{.skip = true};  // another fd's file
    switch (taken.size() % 4) {
      case 1: taken.emplace_back(); return TensorDestination{.skip = true};   // dropped unread
      case 2: taken.emplace_back(); return TensorDestination{};               // declined: stays inline
      case 3: taken.emplace_back(); return TensorDestination{.fd = out, .offset = 4096};  // file to file
      default: break;
    }
    t->set_doc_string("taken");
    taken.emplace_back(static_cast<size_t>(bytes));
    return TensorDestination{.memory = taken.back().data()};
  };
  absl::StatusOr<onnx::ModelProto> model = tide::onnx_graph::StreamModelFile(path, 16, sink);
  if (model.ok()) {
    if (!model->has_graph()) std::abort();
    for (const auto& t : model->graph().initializer()) {
      if (t.data_location() == onnx::TensorProto::EXTERNAL) std::abort();  // every reference resolved
    }
  }
  close(out);
  close(fd);
  return 0;
}
