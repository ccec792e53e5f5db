// UnlinkedFile: bytes kept in a file that has no name in the file system, for an API that reads a
// model by path (ONNX Runtime opening a session), so that the process need not hold the bytes.
//
// Contract:
//  - Write(dir, bytes) creates the file with O_TMPFILE in `dir` (it never appears in a listing and
//    cannot be left behind: the kernel frees it when the last descriptor closes, also when the
//    process is killed), writes every byte and keeps it open; path() is "/proc/self/fd/N", which
//    any open() of this process resolves to the file while the object lives.
//  - Create(dir, write) does the same with bytes that `write` puts into the descriptor it is given
//    (e.g. a protobuf serialized straight to the file, never held in memory whole); size() is the
//    file's size once `write` returned OK. A status from `write` fails the call.
//  - Errors (no O_TMPFILE support in `dir`'s file system, a full or read-only disk, a short write)
//    come back as a status naming `dir`; nothing is left open then.
//  - Thread-safe to read from any thread (immutable after Write); the destructor closes the file.
//
// Used for a model's fused graph (serving/model_loader.cc): a 1.1 GB bge-reranker-base held as a
// std::string for the process's lifetime cost as much RSS as its weights; on disk it costs page
// cache, which the kernel can reclaim.
#ifndef TIDE_RUNTIME_UNLINKED_FILE_H_
#define TIDE_RUNTIME_UNLINKED_FILE_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tide::runtime {

class UnlinkedFile {
 public:
  static absl::StatusOr<std::unique_ptr<UnlinkedFile>> Write(const std::string& dir, std::string_view bytes);
  static absl::StatusOr<std::unique_ptr<UnlinkedFile>> Create(const std::string& dir,
                                                             const std::function<absl::Status(int fd)>& write);
  ~UnlinkedFile();
  UnlinkedFile(const UnlinkedFile&) = delete;
  UnlinkedFile& operator=(const UnlinkedFile&) = delete;

  const std::string& path() const { return path_; }
  size_t size() const { return size_; }

 private:
  UnlinkedFile(int fd, size_t size);
  int fd_;
  size_t size_;
  std::string path_;
};

}  // namespace tide::runtime

#endif  // TIDE_RUNTIME_UNLINKED_FILE_H_
