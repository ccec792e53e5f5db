#include "serving/model_directory.h"

#include <algorithm>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error.h"

namespace tide::serving {
namespace fs = std::filesystem;

namespace {

bool IsVersionName(const std::string& name, int64_t* version) {
  if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  return absl::SimpleAtoi(name, version);
}

// "size:mtime[->target]" of one file, following symlinks (a model file is often a link); "" when
// it vanished while we looked.
std::string FileStamp(const fs::directory_entry& entry) {
  std::error_code ec;
  const auto size = fs::file_size(entry.path(), ec);
  if (ec) return "";
  const auto mtime = fs::last_write_time(entry.path(), ec);
  if (ec) return "";
  std::string stamp = absl::StrCat(size, ":", mtime.time_since_epoch().count());
  if (entry.is_symlink(ec)) absl::StrAppend(&stamp, "->", fs::read_symlink(entry.path(), ec).string());
  return stamp;
}

}  // namespace

bool IsModelName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.front() != '.' &&
         name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

absl::StatusOr<std::vector<std::string>> ListModelDirectories(const fs::path& repository) {
  std::error_code ec;
  if (!fs::is_directory(repository, ec)) {
    return errors::NotFound(absl::StrCat(repository.string(), ": model repository is not a directory"));
  }
  std::vector<std::string> names;
  for (fs::directory_iterator it(repository, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code dir_ec;
    if (IsModelName(name) && it->is_directory(dir_ec)) names.push_back(name);
  }
  if (ec) return errors::Internal(absl::StrCat(repository.string(), ": cannot list: ", ec.message()));
  std::sort(names.begin(), names.end());
  return names;
}

DirectoryFingerprint FingerprintModelDirectory(const fs::path& model_dir) {
  DirectoryFingerprint fp;
  std::error_code ec;
  std::vector<std::string> top;
  for (fs::directory_iterator it(model_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.front() == '.') continue;
    std::error_code e;
    int64_t version = 0;
    if (it->is_directory(e)) {
      if (!IsVersionName(name, &version)) continue;
      std::vector<std::string> files;
      for (fs::recursive_directory_iterator f(it->path(), fs::directory_options::follow_directory_symlink, e), fend;
           !e && f != fend; f.increment(e)) {
        std::error_code fe;
        if (!f->is_regular_file(fe)) continue;
        files.push_back(absl::StrCat(fs::relative(f->path(), it->path(), fe).string(), "=", FileStamp(*f)));
      }
      std::sort(files.begin(), files.end());
      fp.versions[version] = absl::StrJoin(files, ";");
    } else if (it->is_regular_file(e)) {
      top.push_back(absl::StrCat(name, "=", FileStamp(*it)));
    }
  }
  std::sort(top.begin(), top.end());
  fp.model = absl::StrJoin(top, ";");
  return fp;
}

}  // namespace tide::serving
