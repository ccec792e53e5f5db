#include "runtime/unlinked_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tide::runtime {

UnlinkedFile::UnlinkedFile(int fd, size_t size) : fd_(fd), size_(size), path_(absl::StrCat("/proc/self/fd/", fd)) {}

UnlinkedFile::~UnlinkedFile() { ::close(fd_); }

absl::StatusOr<std::unique_ptr<UnlinkedFile>> UnlinkedFile::Write(const std::string& dir, std::string_view bytes) {
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot create an unnamed file in ", dir, ": ", std::strerror(errno)));
  }
  std::unique_ptr<UnlinkedFile> file(new UnlinkedFile(fd, bytes.size()));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::UnavailableError(absl::StrCat("cannot write ", bytes.size(), " bytes to an unnamed file in ", dir,
                                                 ": ", n < 0 ? std::strerror(errno) : "short write"));
    }
    done += static_cast<size_t>(n);
  }
  return file;
}

}  // namespace tide::runtime
