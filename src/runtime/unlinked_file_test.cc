#include "runtime/unlinked_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace tide::runtime {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(UnlinkedFileTest, ReadableByPathWhileAliveAndLeavesNothingBehind) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tide-unlinked-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string bytes(3 << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 % 251);
  std::string path;
  {
    auto file = UnlinkedFile::Write(dir.string(), bytes);
    ASSERT_TRUE(file.ok()) << file.status();
    path = (*file)->path();
    EXPECT_EQ((*file)->size(), bytes.size());
    EXPECT_EQ(path.rfind("/proc/self/fd/", 0), 0u) << path;
    EXPECT_EQ(ReadAll(path), bytes);
    EXPECT_EQ(ReadAll(path), bytes);  // opened again: the same file, from its start
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << "the file must have no name in " << dir;
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << "closed with the object";
  std::filesystem::remove_all(dir);
}

// Create hands the descriptor to a writer (e.g. a protobuf serializing straight into it); the
// size is the file's; the writer's error fails the call.
TEST(UnlinkedFileTest, CreateTakesWhatTheWriterPutsIntoTheDescriptor) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  auto file = UnlinkedFile::Create(dir, [](int fd) -> absl::Status {
    for (int i = 0; i < 3; ++i) {
      if (::write(fd, "abcd", 4) != 4) return absl::InternalError("write");
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->size(), 12u);
  EXPECT_EQ(ReadAll((*file)->path()), "abcdabcdabcd");
  auto failed = UnlinkedFile::Create(dir, [](int) { return absl::UnavailableError("disk full"); });
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(failed.status().message().find("disk full"), std::string::npos) << failed.status();
  EXPECT_NE(failed.status().message().find(dir), std::string::npos) << failed.status();
}

TEST(UnlinkedFileTest, MissingDirectoryIsAnErrorNamingIt) {
  auto file = UnlinkedFile::Write("/no/such/dir", "x");
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("/no/such/dir"), std::string::npos) << file.status();
}

}  // namespace
}  // namespace tide::runtime
