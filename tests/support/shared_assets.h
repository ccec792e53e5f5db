// tide::testing — where tests, black-box tests and benchmarks find the shared read-only test assets
// (third-party models and tokenizer.json files kept in ../shared/assets next to the checkout, never
// copied into the repository).
//
//  - The source root is $TIDE_SOURCE_DIR when set and non-empty (tide_add_test and the black-box
//    tests set it under ctest), else the working directory (ctest also runs every test from the
//    source root, and so does a developer who runs a test binary from a fresh clone).
//  - A fresh clone without ../shared has no assets: SharedAsset() answers nullopt and a test skips
//    with MissingSharedAsset(), which names the path it looked for.
//  - Header-only, no GoogleTest dependency except in TIDE_SKIP_WITHOUT_SHARED_ASSET (so benchmarks
//    can use it too). Every function is thread-safe; each call re-reads the environment.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

namespace tide::testing {

// The assets several tests share (described in ../shared/assets/README.md).
inline constexpr std::string_view kTinyDistilBertModel = "models/tiny-distilbert-classification/model.onnx";
inline constexpr std::string_view kBertBaseUncasedTokenizer = "tokenizers/bert-base-uncased/tokenizer.json";

inline std::filesystem::path SourceRoot() {
  const char* dir = std::getenv("TIDE_SOURCE_DIR");
  return dir != nullptr && *dir != '\0' ? std::filesystem::path(dir) : std::filesystem::current_path();
}

// <source root>/../shared/assets, whether or not it exists.
inline std::filesystem::path SharedAssetsDir() { return SourceRoot() / ".." / "shared" / "assets"; }

// SharedAssetsDir()/<relative> (the folder itself for an empty `relative`), whether or not it exists.
inline std::filesystem::path SharedAssetPath(std::string_view relative) {
  std::filesystem::path path = SharedAssetsDir();
  if (!relative.empty()) path /= std::filesystem::path(relative);
  return path;
}

// SharedAssetPath(relative) when it exists, else nullopt.
inline std::optional<std::filesystem::path> SharedAsset(std::string_view relative) {
  std::filesystem::path path = SharedAssetPath(relative);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  return path;
}

// Why a test that needs SharedAsset(relative) cannot run: names the path it looked for.
inline std::string MissingSharedAsset(std::string_view relative) {
  return SharedAssetPath(relative).string() +
         " is absent (the shared test assets, ../shared/assets next to the source tree, are not "
         "checked out here)";
}

// The bytes of SharedAsset(relative), or nullopt when it is absent or unreadable.
inline std::optional<std::string> ReadSharedAsset(std::string_view relative) {
  const std::optional<std::filesystem::path> path = SharedAsset(relative);
  if (!path) return std::nullopt;
  std::ifstream in(*path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace tide::testing

// In a GoogleTest body or SetUp (anything that returns void): skips the test, naming the missing
// path, unless SharedAsset(relative) exists. The if/else form keeps a caller's `else` its own.
#define TIDE_SKIP_WITHOUT_SHARED_ASSET(relative)          \
  if (::tide::testing::SharedAsset(relative).has_value()) { \
  } else                                                   \
    GTEST_SKIP() << ::tide::testing::MissingSharedAsset(relative)
