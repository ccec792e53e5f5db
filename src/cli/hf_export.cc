#include "cli/hf_export.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tide::cli {
namespace fs = std::filesystem;

namespace {

fs::path SelfBinary() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : self;
}

}  // namespace

std::vector<fs::path> ExportScriptCandidates() {
  const fs::path self = SelfBinary();
  if (self.empty()) return {};
  const fs::path dir = self.parent_path();
  return {(dir / ".." / "tools" / "export_model.py").lexically_normal(),
          (dir / ".." / "share" / "tide" / "tools" / "export_model.py").lexically_normal()};
}

fs::path DefaultExportScript() {
  std::error_code ec;
  for (const fs::path& candidate : ExportScriptCandidates()) {
    if (fs::is_regular_file(candidate, ec)) return candidate;
  }
  return {};
}

absl::Status ExportWithPython(const config::HuggingFaceFolderOptions& folder, const PythonExportOptions& options) {
  const fs::path script = options.script.empty() ? DefaultExportScript() : options.script;
  std::error_code ec;
  if (script.empty()) {
    std::vector<std::string> tried;
    for (const fs::path& p : ExportScriptCandidates()) tried.push_back(p.string());
    return absl::FailedPreconditionError(absl::StrCat(
        "the export tool tools/export_model.py was not found beside the tide binary (looked for ",
        tried.empty() ? std::string("nothing: /proc/self/exe is unreadable") : absl::StrJoin(tried, " and "),
        "; the working directory is never searched): set --export-script PATH (env TIDE_EXPORT_SCRIPT)"));
  }
  if (!fs::is_regular_file(script, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the export tool ", script.string(), " is not there (set --export-script PATH)"));
  }
  if (::access(options.python.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(options.python, " is not there (python3 with torch and onnx "
                                                      "exports the weights)"));
  }
  const fs::path self = SelfBinary();
  std::vector<std::string> argv = {options.python, script.string(), "--checkpoint", folder.folder.string(),
                                   "--name", config::ServedModelName(folder), "--repository",
                                   config::ExportDir(folder).string()};
  if (!folder.task.empty()) {
    argv.push_back("--task");
    argv.push_back(folder.task);
  }
  if (!folder.rerank_tokens.empty()) {
    argv.push_back("--rerank-tokens");
    argv.push_back(folder.rerank_tokens);
  }
  if (!self.empty()) {
    argv.push_back("--tide-binary");
    argv.push_back(self.string());
  }
  std::fprintf(stderr,
               "tide: %s has no ONNX file, only PyTorch/safetensors weights: exporting them to ONNX once into %s "
               "(later starts reuse it):\n  %s\n",
               folder.folder.c_str(), (config::ExportDir(folder) / config::ServedModelName(folder)).c_str(),
               absl::StrJoin(argv, " ").c_str());
  std::fflush(stderr);

  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork failed: ", std::strerror(errno)));
  if (pid == 0) {
    ::dup2(2, 1);  // the export's output goes to tide's stderr
    sigset_t none;   // `tide serve` blocks SIGTERM/SIGINT to sigwait them; the export must not
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(absl::StrCat("waitpid failed: ", std::strerror(errno)));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::InternalError(WIFEXITED(status)
                                 ? absl::StrCat("the export exited ", WEXITSTATUS(status), "; see its messages above")
                                 : absl::StrCat("the export was killed by signal ", WTERMSIG(status)));
}

}  // namespace tide::cli
