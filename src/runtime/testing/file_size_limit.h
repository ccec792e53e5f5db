// tide::runtime::testing::FileSizeLimit — while alive, this process may not grow a file past
// `bytes` (RLIMIT_FSIZE, SIGXFSZ ignored so the call fails with EFBIG instead of killing the test):
// stands in for a full disk in tests of what writes files. Restores both on destruction.
// Test-only, header-only.
#pragma once

#include <sys/resource.h>

#include <csignal>
#include <cstddef>

namespace tide::runtime::testing {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(size_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    handler_ = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = saved_;
    limit.rlim_cur = bytes;
    ok_ = ::setrlimit(RLIMIT_FSIZE, &limit) == 0;
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

  bool ok() const { return ok_; }  // false: the limit could not be set

 private:
  struct rlimit saved_ {};
  void (*handler_)(int) = SIG_DFL;
  bool ok_ = false;
};

}  // namespace tide::runtime::testing
