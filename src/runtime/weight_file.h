// tide::runtime::WeightFile — a model version's shared weights kept in an unnamed file on disk and
// mapped into the process, so that the pages nobody reads can leave the process's memory.
//
// Why: ONNX Runtime keeps a pre-packed copy of every MatMul weight and, for weights it is given
// (AddInitializer, how instances share one copy), never frees the original. In anonymous memory
// those originals stayed resident for the model's lifetime although no kernel reads them again
// (a third of bge-reranker-base's RSS). In a file they are page cache: Release() drops them from
// the process (MADV_DONTNEED) and a later read (another session pre-packing, the embedding rows a
// request uses) faults the bytes back from the page cache or the disk. Correctness never depends
// on which weights ONNX Runtime reads: every byte stays in the file.
//
// Contract:
//  - Open(dir) creates the file with O_TMPFILE in `dir` (no name, nothing left behind, also when
//    the process is killed). Errors: `dir` on a memory file system (tmpfs, ramfs: its pages would
//    still be RAM, only no longer counted in the process), no O_TMPFILE support, not writable.
//  - Allocate(size) reserves `size` more bytes of disk (fallocate: a full disk is an error here,
//    never a SIGBUS when the pages are written) and returns a writable shared mapping of them,
//    page-aligned; the mapping lives as long as the returned pointer (the file as long as its
//    last mapping and this object).
//  - fd() and Allocate's `offset`: where the bytes of a mapping lie in the file, to write them
//    with write(2) (or copy_file_range) instead of through the mapping: bytes written so never
//    become resident in the process (only in the page cache). fd() is -1 once sealed.
//  - Seal() closes the file's descriptor once every tensor is written (the mappings keep the file:
//    it shows in /proc/PID/maps as "DIR/#inode (deleted)", not among the open descriptors);
//    Allocate then fails.
//  - Release() drops the resident pages of every mapping made so far that is still alive from the
//    process (the bytes stay in the file); returns the bytes released. Thread-safe.
//  - Not copyable; Allocate is not thread-safe (one loader writes a version's weights).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace tide::runtime {

class WeightFile {
 public:
  static absl::StatusOr<std::unique_ptr<WeightFile>> Open(const std::string& dir);
  ~WeightFile();
  WeightFile(const WeightFile&) = delete;
  WeightFile& operator=(const WeightFile&) = delete;

  absl::StatusOr<std::shared_ptr<void>> Allocate(size_t size, uint64_t* offset = nullptr);
  int fd() const { return fd_; }
  void Seal();
  size_t Release();

  const std::string& dir() const { return dir_; }
  size_t size() const { return end_; }  // bytes of disk reserved (page-rounded)

 private:
  struct Mapping {
    std::weak_ptr<void> owner;
    void* start;
    size_t length;
  };
  WeightFile(int fd, std::string dir) : fd_(fd), dir_(std::move(dir)) {}
  int fd_;
  std::string dir_;
  size_t end_ = 0;
  absl::Mutex mu_;
  std::vector<Mapping> mappings_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tide::runtime
