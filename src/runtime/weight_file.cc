#include "runtime/weight_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tide::runtime {

absl::StatusOr<std::unique_ptr<WeightFile>> WeightFile::Open(const std::string& dir) {
  struct statfs fs {};
  if (::statfs(dir.c_str(), &fs) != 0) {
    return absl::UnavailableError(absl::StrCat("weights file: ", dir, ": ", std::strerror(errno)));
  }
  if (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC) {
    return absl::FailedPreconditionError(
        absl::StrCat("weights file: ", dir, " is a memory file system (its pages could not leave RAM)"));
  }
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("weights file: cannot create an unnamed file in ", dir, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<WeightFile>(new WeightFile(fd, dir));
}

WeightFile::~WeightFile() { Seal(); }  // live mappings keep the file until they go

void WeightFile::Seal() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

absl::StatusOr<std::shared_ptr<void>> WeightFile::Allocate(size_t size, uint64_t* offset_out) {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat("weights file in ", dir_, ": sealed"));
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t length = (std::max<size_t>(size, 1) + page - 1) / page * page;
  const off_t offset = static_cast<off_t>(end_);
  if (int err = ::posix_fallocate(fd_, offset, static_cast<off_t>(length)); err != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("weights file in ", dir_, ": cannot reserve ", length, " bytes: ", std::strerror(err)));
  }
  void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, offset);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("weights file in ", dir_, ": cannot map ", length, " bytes: ", std::strerror(errno)));
  }
  end_ += length;
  if (offset_out != nullptr) *offset_out = static_cast<uint64_t>(offset);
  std::shared_ptr<void> owner(p, [length](void* q) { ::munmap(q, length); });
  absl::MutexLock lock(&mu_);
  mappings_.push_back({owner, p, length});
  return owner;
}

size_t WeightFile::Release() {
  absl::MutexLock lock(&mu_);
  size_t released = 0;
  for (auto it = mappings_.begin(); it != mappings_.end();) {
    std::shared_ptr<void> alive = it->owner.lock();  // held while advising: not unmapped meanwhile
    if (alive == nullptr) {
      it = mappings_.erase(it);
      continue;
    }
    if (::madvise(it->start, it->length, MADV_DONTNEED) == 0) released += it->length;
    ++it;
  }
  return released;
}

}  // namespace tide::runtime
