#include "runtime/unlinked_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tide::runtime {

UnlinkedFile::UnlinkedFile(int fd, size_t size) : fd_(fd), size_(size), path_(absl::StrCat("/proc/self/fd/", fd)) {}

UnlinkedFile::~UnlinkedFile() { ::close(fd_); }

absl::StatusOr<std::unique_ptr<UnlinkedFile>> UnlinkedFile::Create(const std::string& dir,
                                                                   const std::function<absl::Status(int fd)>& write) {
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot create an unnamed file in ", dir, ": ", std::strerror(errno)));
  }
  std::unique_ptr<UnlinkedFile> file(new UnlinkedFile(fd, 0));
  if (absl::Status s = write(fd); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("unnamed file in ", dir, ": ", s.message()));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return absl::UnavailableError(absl::StrCat("unnamed file in ", dir, ": fstat: ", std::strerror(errno)));
  }
  file->size_ = static_cast<size_t>(st.st_size);
  return file;
}

absl::StatusOr<std::unique_ptr<UnlinkedFile>> UnlinkedFile::Write(const std::string& dir, std::string_view bytes) {
  return Create(dir, [bytes](int fd) -> absl::Status {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return absl::UnavailableError(absl::StrCat("cannot write ", bytes.size(), " bytes: ",
                                                   n < 0 ? std::strerror(errno) : "short write"));
      }
      done += static_cast<size_t>(n);
    }
    return absl::OkStatus();
  });
}

}  // namespace tide::runtime
