#include "blackbox_support.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "shared_assets.h"

namespace tide::blackbox {

namespace fs = std::filesystem;

namespace {

fs::path EnvPath(const char* name, const fs::path& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? fs::path(v) : fallback;
}

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::Status WriteFile(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

// Identifies the export tools' current contents, so that a cached export made by other tools is
// redone.
absl::StatusOr<std::string> ExportToolsStamp(const std::string& preset) {
  std::string all;
  for (const char* f : {"tools/export_model.py", "tools/crossencoder.py", "tools/biencoder.py",
                        "tools/make_wordpiece_tokenizer.py"}) {
    auto text = ReadFile(SourceDir() / f);
    if (!text.ok()) return text.status();
    absl::StrAppend(&all, f, "\n", *text);
  }
  return absl::StrCat(preset, " ", all.size(), " ", std::hash<std::string>{}(all));
}

}  // namespace

fs::path SourceDir() { return tide::testing::SourceRoot(); }
fs::path BinaryDir() { return EnvPath("TIDE_BINARY_DIR", SourceDir() / "build"); }
fs::path TideBinary() { return BinaryDir() / "tide"; }

std::optional<fs::path> SharedAssets() {
  const std::optional<fs::path> p = tide::testing::SharedAsset("");
  std::error_code ec;
  if (p && fs::is_directory(*p, ec)) return fs::weakly_canonical(*p, ec);
  return std::nullopt;
}

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "tide-blackbox-XXXXXX").string();
  if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) fs::remove_all(path_, ec);
}

absl::StatusOr<fs::path> ExportedTinyBert(std::optional<int> seed) { return ExportedPreset("tiny-bert", seed); }

absl::StatusOr<fs::path> ExportedPreset(const std::string& preset, std::optional<int> seed) {
  const std::string name = seed.has_value() ? absl::StrCat(preset, "-seed-", *seed) : preset;
  const fs::path cache = BinaryDir() / "blackbox_models";
  const fs::path entry = cache / name;
  const fs::path stamp_file = cache / ("." + name + ".stamp");
  auto stamp = ExportToolsStamp(preset);
  if (!stamp.ok()) return stamp.status();
  std::error_code ec;
  fs::create_directories(cache, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", cache.string(), ": ", ec.message()));

  // One export at a time across test binaries; whoever gets the lock second reuses the result.
  const int lock = ::open((cache / ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock < 0) return absl::InternalError(absl::StrCat("cannot open the lock in ", cache.string()));
  ::flock(lock, LOCK_EX);
  auto up_to_date = [&] {
    auto have = ReadFile(stamp_file);
    return have.ok() && *have == *stamp && fs::is_regular_file(entry / "1" / "model.onnx", ec) &&
           fs::is_regular_file(entry / "tokenizer.json", ec);
  };
  absl::Status status;
  if (!up_to_date()) {
    fs::remove(stamp_file, ec);
    fs::remove_all(entry, ec);
    std::vector<std::string> command = {"/usr/bin/python3", (SourceDir() / "tools" / "export_model.py").string(),
                                        "--preset", preset, "--repository", cache.string(), "--name", name,
                                        "--tide-binary", TideBinary().string(), "--quiet"};
    if (seed.has_value()) {
      command.push_back("--seed");
      command.push_back(std::to_string(*seed));
    }
    auto run = RunCommand(command);
    if (!run.ok()) {
      status = run.status();
    } else if (run->exit_code != 0) {
      status = absl::InternalError(absl::StrCat("tools/export_model.py --preset ", preset, " exited ", run->exit_code,
                                                ":\n", run->output));
    } else {
      status = WriteFile(stamp_file, *stamp);
    }
  }
  ::flock(lock, LOCK_UN);
  ::close(lock);
  if (!status.ok()) return status;
  return entry;
}

absl::Status AddModel(const fs::path& repository, const std::string& name, const fs::path& model_file,
                      const fs::path& tokenizer_file, std::optional<std::string> config_pbtxt) {
  const fs::path dir = repository / name;
  std::error_code ec;
  fs::create_directories(dir / "1", ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
  fs::create_symlink(fs::absolute(model_file), dir / "1" / "model.onnx", ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot link ", model_file.string(), ": ", ec.message()));
  fs::copy_file(tokenizer_file, dir / "tokenizer.json", fs::copy_options::overwrite_existing, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot copy ", tokenizer_file.string(), ": ", ec.message()));
  if (config_pbtxt.has_value()) return WriteFile(dir / "config.pbtxt", *config_pbtxt);
  return absl::OkStatus();
}

absl::Status AddTinyBert(const fs::path& repository, const std::string& name,
                         std::optional<std::string> config_pbtxt) {
  auto tiny = ExportedTinyBert();
  if (!tiny.ok()) return tiny.status();
  return AddModel(repository, name, *tiny / "1" / "model.onnx", *tiny / "tokenizer.json", std::move(config_pbtxt));
}

std::string TinyBertConfig(const std::string& extra) {
  return "backend: \"onnxruntime\"\nmax_batch_size: 16\n"
         "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n" +
         extra;
}

absl::StatusOr<std::unique_ptr<tide::testing::ServerProcess>> StartTideServe(const fs::path& repository,
                                                                              const std::vector<std::string>& args,
                                                                              std::chrono::milliseconds startup_timeout) {
  tide::testing::ServerProcessOptions options;
  options.binary = TideBinary().string();
  options.args = {"serve", "--model-repository", repository.string()};
  options.args.insert(options.args.end(), args.begin(), args.end());
  options.startup_timeout = startup_timeout;
  return tide::testing::ServerProcess::Start(options);
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, std::string_view stdin_text) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  // stdin comes from a file, so that a child that writes before it reads cannot deadlock with us.
  TempDir tmp;
  const fs::path input = tmp.path() / "stdin";
  if (absl::Status s = WriteFile(input, stdin_text); !s.ok()) return s;
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    const int in = ::open(input.c_str(), O_RDONLY);
    if (in < 0) _exit(126);
    ::dup2(in, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    _exit(127);
  }
  ::close(out[1]);
  CommandResult result;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n > 0) {
      result.output.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(out[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  if (result.exit_code == 127) {
    return absl::NotFoundError(absl::StrCat("cannot run ", absl::StrJoin(argv, " "), ": ", result.output));
  }
  return result;
}

nlohmann::json ParseJson(std::string_view text) {
  return nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

double MetricSum(const std::string& text, std::string_view name, const std::vector<std::string>& label_parts) {
  double sum = 0;
  for (const std::string& text_line : std::vector<std::string>(absl::StrSplit(text, '\n'))) {
    const std::string_view line = text_line;
    if (line.empty() || line[0] == '#' || line.substr(0, name.size()) != name) continue;
    const std::string_view rest = line.substr(name.size());
    if (rest.empty() || (rest[0] != '{' && rest[0] != ' ')) continue;  // a longer metric name
    const size_t space = rest.rfind(' ');
    const std::string_view labels = rest.substr(0, space);
    bool all = true;
    for (const std::string& part : label_parts) all = all && labels.find(part) != std::string_view::npos;
    double v = 0;
    if (all && absl::SimpleAtod(std::string(rest.substr(space + 1)), &v)) sum += v;
  }
  return sum;
}

void SharedServer::Start(const std::function<absl::Status(const fs::path& repository)>& populate,
                         const std::vector<std::string>& flags) {
  process_.reset();
  error_.clear();
  if (scratch_.path().empty()) {
    error_ = "cannot create a scratch directory under " + fs::temp_directory_path().string();
    return;
  }
  if (absl::Status s = populate(repository()); !s.ok()) {
    error_ = s.ToString();
    return;
  }
  auto server = StartTideServe(repository(), flags);
  if (!server.ok()) {
    error_ = server.status().ToString();
    return;
  }
  process_ = *std::move(server);
}

}  // namespace tide::blackbox
