#include "runtime/weight_file.h"

#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "runtime/testing/file_size_limit.h"

namespace tide::runtime {
namespace {

// The process's resident pages, from /proc/self/statm.
size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

// A folder on the disk the tests run from (the build tree), not the temp directory, which may be
// a tmpfs where WeightFile refuses to go.
class WeightFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::current_path() / ("tide-weight-file-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    struct statfs fs {};
    ASSERT_EQ(::statfs(dir_.c_str(), &fs), 0);
    if (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC) GTEST_SKIP() << dir_ << " is on a memory file system";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(WeightFileTest, BytesSurviveReleaseAndLeaveTheProcessMemory) {
  auto file = WeightFile::Open(dir_.string());
  ASSERT_TRUE(file.ok()) << file.status();
  constexpr size_t kSize = 64u << 20;
  auto a = (*file)->Allocate(kSize);
  auto b = (*file)->Allocate(100);  // a second mapping, page-rounded in the file
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->get()) % static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE)), 0u);
  auto* words = static_cast<uint32_t*>(a->get());
  for (size_t i = 0; i < kSize / 4; ++i) words[i] = static_cast<uint32_t>(i * 2654435761u);
  std::memset(b->get(), 0x5a, 100);
  EXPECT_TRUE(std::filesystem::is_empty(dir_)) << "the file must have no name";
  EXPECT_GE((*file)->size(), kSize + 100);

  const size_t before = ResidentBytes();
  EXPECT_GE((*file)->Release(), kSize + 100);
  const size_t after = ResidentBytes();
  EXPECT_LT(after + kSize / 2, before) << "64 MB written then released: resident " << before << " -> " << after;

  for (size_t i = 0; i < kSize / 4; ++i) {  // read back from the file
    if (words[i] != static_cast<uint32_t>(i * 2654435761u)) FAIL() << "word " << i << " changed after Release";
  }
  for (int i = 0; i < 100; ++i) ASSERT_EQ(static_cast<unsigned char*>(b->get())[i], 0x5a);
}

TEST_F(WeightFileTest, ReleaseSkipsMappingsThatAreGone) {
  auto file = WeightFile::Open(dir_.string());
  ASSERT_TRUE(file.ok()) << file.status();
  auto kept = (*file)->Allocate(4096);
  ASSERT_TRUE(kept.ok());
  {
    auto dropped = (*file)->Allocate(1 << 20);
    ASSERT_TRUE(dropped.ok());
  }
  EXPECT_EQ((*file)->Release(), 4096u);  // only the live mapping
  (*file)->Seal();
  auto after = (*file)->Allocate(4096);
  EXPECT_FALSE(after.ok());
  std::memset(kept->get(), 1, 4096);  // the mapping outlives the descriptor
  EXPECT_EQ((*file)->Release(), 4096u);
  EXPECT_EQ(static_cast<unsigned char*>(kept->get())[4095], 1);
}

TEST_F(WeightFileTest, AFullDiskIsAnErrorWhenAllocatingNeverASignalLater) {
  auto file = WeightFile::Open(dir_.string());
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<std::shared_ptr<void>> fits, too_big;
  {
    // A file-size limit stands in for a full disk: fallocate fails the same way (EFBIG / ENOSPC).
    testing::FileSizeLimit limit(1 << 20);
    ASSERT_TRUE(limit.ok());
    fits = (*file)->Allocate(512 << 10);
    too_big = (*file)->Allocate(1 << 20);
  }
  ASSERT_TRUE(fits.ok()) << fits.status();
  std::memset(fits->get(), 7, 512 << 10);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.status().message().find("cannot reserve"), std::string::npos) << too_big.status();
}

TEST(WeightFileErrorsTest, RefusesMemoryFileSystemsAndMissingFolders) {
  auto missing = WeightFile::Open("/nonexistent-tide-folder");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent-tide-folder"), std::string::npos) << missing.status();
  struct statfs fs {};
  if (::statfs("/dev/shm", &fs) != 0 || fs.f_type != TMPFS_MAGIC) GTEST_SKIP() << "no tmpfs at /dev/shm";
  auto shm = WeightFile::Open("/dev/shm");
  ASSERT_FALSE(shm.ok());
  EXPECT_EQ(shm.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(shm.status().message().find("memory file system"), std::string::npos) << shm.status();
}

}  // namespace
}  // namespace tide::runtime
