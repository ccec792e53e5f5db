#include "config/model_repository.h"

#include <algorithm>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tide::config {
namespace fs = std::filesystem;
namespace {

bool IsHidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.empty() || name[0] == '.';
}

// Decimal directory names only ("1", "0042"); "v1", "1.0" and "-1" are not versions.
bool ParseVersion(const std::string& name, int64_t* version) {
  if (name.empty() || !std::all_of(name.begin(), name.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    return false;
  }
  return absl::SimpleAtoi(name, version);
}

absl::StatusOr<std::vector<int64_t>> ChooseVersions(const std::string& file, const ModelConfig& c,
                                                    const std::vector<int64_t>& available) {
  const ModelVersionPolicy& vp = c.version_policy();
  if (vp.has_all()) return available;
  if (vp.has_specific()) {
    std::vector<int64_t> chosen;
    for (int64_t v : vp.specific().versions()) {
      if (!std::binary_search(available.begin(), available.end(), v)) {
        return absl::NotFoundError(absl::StrCat(file, ": version_policy.specific.versions: version ", v,
                                                " has no directory"));
      }
      chosen.push_back(v);
    }
    std::sort(chosen.begin(), chosen.end());
    chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
    return chosen;
  }
  const size_t n = vp.has_latest() && vp.latest().num_versions() > 0 ? vp.latest().num_versions() : 1;
  const size_t first = available.size() > n ? available.size() - n : 0;
  return std::vector<int64_t>(available.begin() + first, available.end());
}

}  // namespace

absl::StatusOr<RepositoryModel> LoadRepositoryModel(const fs::path& model_dir,
                                                    const RepositoryOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec)) {
    return absl::NotFoundError(absl::StrCat(model_dir.string(), ": not a model directory"));
  }
  RepositoryModel m;
  m.directory = model_dir;
  m.name = model_dir.filename().string();
  if (m.name.empty()) m.name = model_dir.parent_path().filename().string();  // "dir/" form
  m.config_file = model_dir / kConfigFilename;
  const std::string file = ConfigSource(m, options);

  if (options.config_override.has_value()) {
    m.config = *options.config_override;
  } else if (fs::exists(m.config_file, ec)) {
    auto parsed = ReadModelConfigFile(m.config_file);
    if (!parsed.ok()) return parsed.status();
    m.config = *std::move(parsed);
  } else {
    m.config_generated = true;
    m.config.set_platform(std::string(kOnnxRuntimePlatform));
  }
  if (m.config.name().empty()) {
    m.config.set_name(m.name);
  } else if (m.config.name() != m.name) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": name: \"", m.config.name(),
                                                   "\" does not match the model directory \"", m.name, "\""));
  }
  // The configured name is checked on its text alone (IsModelFileName) before any file is looked
  // up by it, and a name that is not allowed gets the same answer as one that names no file, so
  // the answer never tells what exists outside the version directory.
  const bool name_given = !m.config.default_model_filename().empty();
  const std::string model_filename = name_given ? m.config.default_model_filename() : std::string(kDefaultModelFilename);
  const bool name_allowed = IsModelFileName(model_filename);

  for (fs::directory_iterator it(model_dir, ec), end; !ec && it != end; it.increment(ec)) {
    int64_t v = 0;
    if (it->is_directory(ec) && ParseVersion(it->path().filename().string(), &v)) {
      m.available_versions.push_back(v);
    }
  }
  if (ec) return absl::InternalError(absl::StrCat(model_dir.string(), ": cannot list: ", ec.message()));
  std::sort(m.available_versions.begin(), m.available_versions.end());
  if (m.available_versions.empty()) {
    return absl::NotFoundError(absl::StrCat(model_dir.string(), ": no version directories (expected e.g. 1/",
                                            name_allowed ? model_filename : std::string(kDefaultModelFilename), ")"));
  }
  auto chosen = ChooseVersions(file, m.config, m.available_versions);
  if (!chosen.ok()) return chosen.status();
  for (int64_t v : *chosen) {
    // The directory name as found on disk ("0042" stays "0042").
    fs::path dir;
    for (fs::directory_iterator it(model_dir, ec), end; !ec && it != end; it.increment(ec)) {
      int64_t found = 0;
      if (it->is_directory(ec) && ParseVersion(it->path().filename().string(), &found) && found == v) {
        dir = it->path();
        break;
      }
    }
    if (name_given && (!name_allowed || !fs::is_regular_file(dir / model_filename, ec))) {
      return absl::NotFoundError(absl::StrCat(file, ": default_model_filename: names no model file in version directory ",
                                              dir.filename().string(),
                                              " (a file name there: one path component, no '/', '\\', '.' or '..')"));
    }
    ModelVersion mv{v, dir, dir / model_filename};
    if (!fs::is_regular_file(mv.model_file, ec)) {
      return absl::NotFoundError(absl::StrCat(mv.model_file.string(), ": model file missing (default model.onnx)"));
    }
    m.versions.push_back(std::move(mv));
  }

  if (options.read_signature) {
    if (auto s = NormalizeModelForVersion(m.versions.back(), options, &m); !s.ok()) return s;
  }
  return m;
}

absl::StatusOr<ModelConfig> VersionConfig(const RepositoryModel& model, const ModelVersion& version,
                                          std::string* source) {
  ModelConfig out = model.config;
  if (source != nullptr) *source = model.config_file.string();
  const fs::path own = version.directory / kVersionConfigFilename;
  std::error_code ec;
  if (version.directory.empty() || !fs::is_regular_file(own, ec)) return out;
  auto parsed = ReadModelConfigFile(own);
  if (!parsed.ok()) return parsed.status();
  for (const auto& [key, value] : parsed->parameters()) (*out.mutable_parameters())[key] = value;
  if (parsed->model_warmup_size() > 0) *out.mutable_model_warmup() = parsed->model_warmup();
  if (source != nullptr) *source = own.string();
  return out;
}

fs::path VersionTokenizerPath(const RepositoryModel& model, const ModelVersion& version, const std::string& tokenizer) {
  std::error_code ec;
  if (!version.directory.empty() && fs::is_regular_file(version.directory / tokenizer, ec)) {
    return version.directory / tokenizer;
  }
  return model.directory / tokenizer;
}

std::string ConfigSource(const RepositoryModel& model, const RepositoryOptions& options) {
  if (options.config_override.has_value()) {
    return absl::StrCat(model.directory.string(), " (parameters.config of the load request)");
  }
  return model.config_file.string();
}

absl::Status NormalizeModelForVersion(const ModelVersion& version, const RepositoryOptions& options,
                                      RepositoryModel* model) {
  if (!options.read_signature) return absl::InvalidArgumentError("NormalizeModelForVersion: no signature reader");
  const std::string file = ConfigSource(*model, options);
  auto signature = options.read_signature(version.model_file);
  if (!signature.ok()) return signature.status();
  if (auto s = NormalizeModelConfig(file, *signature, &model->config, options.normalize); !s.ok()) return s;
  return ValidateModelConfig(file, model->config, &*signature);
}

absl::StatusOr<std::vector<RepositoryModel>> ScanModelRepository(const fs::path& repository,
                                                                 const RepositoryOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(repository, ec)) {
    return absl::NotFoundError(absl::StrCat(repository.string(), ": model repository is not a directory"));
  }
  std::vector<fs::path> dirs;
  for (fs::directory_iterator it(repository, ec), end; !ec && it != end; it.increment(ec)) {
    if (!IsHidden(it->path()) && it->is_directory(ec)) dirs.push_back(it->path());
  }
  if (ec) return absl::InternalError(absl::StrCat(repository.string(), ": cannot list: ", ec.message()));
  std::sort(dirs.begin(), dirs.end());
  std::vector<RepositoryModel> models;
  for (const fs::path& dir : dirs) {
    auto m = LoadRepositoryModel(dir, options);
    if (!m.ok()) return m.status();
    models.push_back(*std::move(m));
  }
  return models;
}

}  // namespace tide::config
