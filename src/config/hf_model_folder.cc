#include "config/hf_model_folder.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace tide::config {
namespace fs = std::filesystem;
namespace {

using json = nlohmann::json;

// Weights that tools/export_model.py can turn into ONNX.
constexpr const char* kWeightFiles[] = {"model.safetensors", "model.safetensors.index.json",
                                             "pytorch_model.bin"};

bool IsFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

absl::StatusOr<std::string> ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<int64_t> PositiveInt(const json& value, const std::string& file, const char* key) {
  if (!value.is_number_integer() || value.get<int64_t>() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", key, ": ", value.dump(), " is not a positive integer"));
  }
  return value.get<int64_t>();
}

// Paths tried for the ONNX file, in order.
std::vector<fs::path> OnnxCandidates(const HuggingFaceFolderOptions& o) {
  // A sentence-transformers folder's own ONNX files output token vectors (last_hidden_state) and
  // leave the pooling to Python; tide serves the export, whose graph pools.
  if (o.onnx_file.empty() && IsSentenceTransformersFolder(o.folder)) return {};
  if (o.onnx_file.empty()) return {o.folder / "onnx" / "model.onnx", o.folder / "model.onnx"};
  const fs::path given(o.onnx_file);
  if (given.is_absolute()) return {given};
  return {o.folder / given, o.folder / "onnx" / given};
}

constexpr const char* kDecoderArchitectures[] = {"Qwen3ForCausalLM", "Qwen2ForCausalLM",
                                                  "Qwen3ForSequenceClassification",
                                                  "Qwen2ForSequenceClassification"};

void SetParameter(ModelConfig* config, const std::string& key, const std::string& value) {
  (*config->mutable_parameters())[key].set_string_value(value);
}

}  // namespace

absl::StatusOr<HuggingFaceConfig> ParseHuggingFaceConfig(std::string_view json_text, std::string_view file_name,
                                                         int64_t max_sequence_length_cap) {
  const std::string file(file_name);
  const json d = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (d.is_discarded() || !d.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": not a JSON object"));
  }
  HuggingFaceConfig c;
  if (auto it = d.find("model_type"); it != d.end()) {
    if (!it->is_string()) return absl::InvalidArgumentError(absl::StrCat(file, ": model_type: not a string"));
    c.model_type = it->get<std::string>();
  }
  if (auto it = d.find("architectures"); it != d.end() && !it->is_null()) {
    if (!it->is_array()) return absl::InvalidArgumentError(absl::StrCat(file, ": architectures: not a list of names"));
    for (const json& a : *it) {
      if (!a.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(file, ": architectures: ", a.dump(), " is not a name"));
      }
      c.architectures.push_back(a.get<std::string>());
    }
  }
  if (auto it = d.find("id2label"); it != d.end() && !it->is_null()) {
    if (!it->is_object() || it->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": id2label: not an object of \"id\": \"label\""));
    }
    std::map<int64_t, std::string> by_id;
    for (const auto& [key, label] : it->items()) {
      int64_t id = -1;
      if (!absl::SimpleAtoi(key, &id) || id < 0 || !label.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(file, ": id2label: entry \"", key, "\": ", label.dump(), " is not \"<id>\": \"<label>\""));
      }
      by_id[id] = label.get<std::string>();
    }
    if (by_id.size() != it->size() || by_id.rbegin()->first != static_cast<int64_t>(by_id.size()) - 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": id2label: ids must be 0..", it->size() - 1, " (each once)"));
    }
    for (auto& [id, label] : by_id) c.labels.push_back(std::move(label));
    c.num_labels = static_cast<int64_t>(c.labels.size());
  }
  if (auto it = d.find("num_labels"); it != d.end() && !it->is_null()) {
    auto n = PositiveInt(*it, file, "num_labels");
    if (!n.ok()) return n.status();
    if (c.num_labels && *c.num_labels != *n) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": num_labels ", *n, " disagrees with id2label's ",
                                                     *c.num_labels, " labels"));
    }
    c.num_labels = *n;
  }
  if (auto it = d.find("max_position_embeddings"); it != d.end() && !it->is_null()) {
    auto positions = PositiveInt(*it, file, "max_position_embeddings");
    if (!positions.ok()) return positions.status();
    int64_t length = *positions;
    // RoBERTa-style models number real tokens from padding_idx + 1: the first pad_token_id + 1
    // rows of the position table are never used by a token (514 rows serve 512 tokens).
    if (c.model_type == "roberta" || c.model_type == "xlm-roberta" || c.model_type == "camembert") {
      int64_t pad = 1;
      if (auto p = d.find("pad_token_id"); p != d.end() && p->is_number_integer() && p->get<int64_t>() >= 0) {
        pad = p->get<int64_t>();
      }
      length -= pad + 1;
    }
    if (length < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": max_position_embeddings: ", *positions, " leaves room for ", length, " token(s)"));
    }
    c.max_sequence_length = std::min(length, max_sequence_length_cap);
  }
  return c;
}

std::string ServedModelName(const HuggingFaceFolderOptions& o) {
  if (!o.served_model_name.empty()) return o.served_model_name;
  const fs::path folder = o.folder.lexically_normal();
  std::string name = folder.filename().string();
  if (name.empty() || name == ".") name = folder.parent_path().filename().string();  // "dir/" form
  if (name.empty() || name == "." || name == "..") name = fs::absolute(o.folder).lexically_normal().filename().string();
  return name;
}

bool IsSentenceTransformersFolder(const fs::path& folder) { return IsFile(folder / "modules.json"); }

fs::path ExportDir(const HuggingFaceFolderOptions& o) {
  return o.export_dir.empty() ? o.folder / ".tide" : o.export_dir;
}

std::string ExportCommand(const HuggingFaceFolderOptions& o) {
  std::string command = absl::StrCat("/usr/bin/python3 tools/export_model.py --checkpoint ", o.folder.string(),
                                     " --name ", ServedModelName(o), " --repository ", ExportDir(o).string());
  if (!o.task.empty()) absl::StrAppend(&command, " --task ", o.task);
  if (!o.rerank_tokens.empty()) absl::StrAppend(&command, " --rerank-tokens ", o.rerank_tokens);
  return command;
}

bool IsSupportedDecoderArchitecture(std::string_view architecture) {
  return std::find(std::begin(kDecoderArchitectures), std::end(kDecoderArchitectures), architecture) !=
         std::end(kDecoderArchitectures);
}

bool IsCausalLmArchitecture(std::string_view architecture) {
  constexpr std::string_view kSuffix = "ForCausalLM";
  return architecture.size() >= kSuffix.size() &&
         architecture.substr(architecture.size() - kSuffix.size()) == kSuffix;
}

absl::Status CheckDecoderOptions(const HuggingFaceConfig& config, const std::string& file,
                                 const HuggingFaceFolderOptions& o) {
  if (!o.task.empty() && o.task != "rerank") {
    return absl::InvalidArgumentError(absl::StrCat("--task ", o.task, ": the only task is rerank"));
  }
  bool causal_lm = false;
  for (const std::string& a : config.architectures) {
    if (!IsCausalLmArchitecture(a)) continue;
    // A sentence-transformers folder is an embedding model (Qwen3-Embedding's config.json names
    // Qwen3ForCausalLM); --task rerank still asks for the reranker.
    if (IsSupportedDecoderArchitecture(a) && o.task.empty() && IsSentenceTransformersFolder(o.folder)) continue;
    if (!IsSupportedDecoderArchitecture(a)) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ": architecture ", a, " is not supported: tide serves the decoder rerankers ",
          absl::StrJoin(std::begin(kDecoderArchitectures), std::end(kDecoderArchitectures), ", "),
          " (and encoder cross-encoders)"));
    }
    causal_lm = true;
    if (o.task != "rerank") {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ": ", a, " is a causal language model, not a reranker by itself: pass --task rerank to serve it "
          "as one (the score is the next-token logit of the rerank tokens, yes - no; --rerank-tokens YES,NO "
          "picks others)"));
    }
  }
  if (!o.rerank_tokens.empty() && !causal_lm) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rerank-tokens ", o.rerank_tokens, ": only for a causal LM folder (Qwen3ForCausalLM, Qwen2ForCausalLM); ",
        file, " names ", config.architectures.empty() ? std::string("no architecture")
                                                      : absl::StrJoin(config.architectures, ", ")));
  }
  return absl::OkStatus();
}

absl::StatusOr<RepositoryModel> LoadHuggingFaceFolder(const HuggingFaceFolderOptions& o,
                                                      const RepositoryOptions& repository_options) {
  std::error_code ec;
  if (!fs::is_directory(o.folder, ec)) {
    return absl::NotFoundError(absl::StrCat(o.folder.string(), ": not a directory (--model wants a HuggingFace "
                                            "model folder: config.json, tokenizer.json, onnx/model.onnx)"));
  }
  const std::string name = ServedModelName(o);
  if (name.empty() || name[0] == '.' || name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("bad model name \"", name, "\" (from ", o.folder.string(),
                                                   "; set one with --served-model-name)"));
  }

  // A decoder folder's task, before anything is exported.
  const fs::path config_json = o.folder / "config.json";
  if (IsFile(config_json)) {
    auto text = ReadText(config_json);
    if (!text.ok()) return text.status();
    auto hf = ParseHuggingFaceConfig(*text, config_json.string(), o.max_sequence_length_cap);
    if (!hf.ok()) return hf.status();
    if (auto s = CheckDecoderOptions(*hf, config_json.string(), o); !s.ok()) return s;
  } else if (!o.rerank_tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--rerank-tokens: ", config_json.string(), " not found"));
  }

  // The ONNX file, or the export of the folder's weights.
  fs::path onnx;
  const std::vector<fs::path> candidates = OnnxCandidates(o);
  for (const fs::path& p : candidates) {
    if (IsFile(p)) {
      onnx = p;
      break;
    }
  }
  std::vector<std::string> tried;
  for (const fs::path& p : candidates) tried.push_back(p.string());
  if (onnx.empty() && !o.onnx_file.empty()) {
    return absl::NotFoundError(absl::StrCat("--onnx-file ", o.onnx_file, ": not found (tried ",
                                            absl::StrJoin(tried, ", "), ")"));
  }
  if (onnx.empty()) {
    const fs::path exported = ExportDir(o) / name;
    std::string weights;
    for (const char* w : kWeightFiles) {
      if (IsFile(o.folder / w)) {
        weights = w;
        break;
      }
    }
    const fs::path exported_onnx = exported / "1" / "model.onnx";
    // An export older than the weights (a `git pull` brought new ones) is stale.
    const bool stale = !weights.empty() && IsFile(exported_onnx) &&
                       fs::last_write_time(o.folder / weights, ec) > fs::last_write_time(exported_onnx, ec);
    std::string export_error;
    if ((stale || !IsFile(exported_onnx)) && !weights.empty() && o.export_weights) {
      if (absl::Status s = o.export_weights(o); !s.ok()) export_error = absl::StrCat(" (", s.message(), ")");
    }
    if (IsFile(exported_onnx) && stale && export_error.empty() && !o.export_weights) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the export in ", exported.string(), " is older than ", (o.folder / weights).string(),
          "; export it again with\n  ", ExportCommand(o), "\n(or remove ", exported.string(), ")"));
    }
    if (IsFile(exported_onnx) && export_error.empty()) {
      auto m = LoadRepositoryModel(exported, repository_options);
      if (!m.ok()) {
        return absl::Status(m.status().code(), absl::StrCat("the export of ", o.folder.string(), " in ",
                                                            exported.string(), ": ", m.status().message()));
      }
      return m;
    }
    if (!weights.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          o.folder.string(), " has ", weights, " but no ONNX file (tried ", absl::StrJoin(tried, ", "),
          ") and no export in ", exported.string(), export_error,
          "; tide does not run PyTorch: export it once with\n  ", ExportCommand(o),
          "\nand start again (tide serve --model then serves the export)"));
    }
    return absl::NotFoundError(absl::StrCat(o.folder.string(), ": no ONNX file (tried ", absl::StrJoin(tried, ", "),
                                            ") and no weights to export (",
                                            absl::StrJoin(std::begin(kWeightFiles), std::end(kWeightFiles), ", "),
                                            ")"));
  }

  if (!IsFile(config_json)) {
    return absl::NotFoundError(absl::StrCat(config_json.string(), ": not found (a HuggingFace model folder has "
                                            "config.json: labels, model type and position table size)"));
  }
  const fs::path tokenizer = o.folder / "tokenizer.json";
  if (!IsFile(tokenizer)) {
    return absl::NotFoundError(absl::StrCat(tokenizer.string(), ": not found (tide reads the fast tokenizer's "
                                            "tokenizer.json; vocab.txt / sentencepiece.bpe.model alone are not "
                                            "enough)"));
  }
  auto text = ReadText(config_json);
  if (!text.ok()) return text.status();
  const std::string file = config_json.string();
  auto hf = ParseHuggingFaceConfig(*text, file, o.max_sequence_length_cap);
  if (!hf.ok()) return hf.status();

  RepositoryModel m;
  m.name = name;
  m.directory = o.folder;
  m.config_file = config_json;
  m.config_generated = true;
  m.config.set_name(name);
  m.config.set_platform(std::string(kOnnxRuntimePlatform));
  m.config.set_default_model_filename(onnx.filename().string());
  SetParameter(&m.config, "tokenizer", "tokenizer.json");
  if (hf->max_sequence_length) SetParameter(&m.config, "max_sequence_length", std::to_string(*hf->max_sequence_length));
  m.labels = hf->labels;
  m.available_versions = {1};
  m.versions.push_back(ModelVersion{1, onnx.parent_path(), onnx});

  // Labels: config.json's, checked against the model; else the model's.
  std::optional<int64_t> labels = hf->num_labels;
  std::optional<ModelSignature> signature;
  if (repository_options.read_signature) {
    auto read = repository_options.read_signature(onnx);
    if (!read.ok()) return read.status();
    signature = *std::move(read);
    if (labels && signature->num_labels > 0 && *labels != signature->num_labels) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": ", *labels, " label(s), but ", onnx.string(),
                                                     " output ", signature->logits_name, " has ",
                                                     signature->num_labels));
    }
    if (!labels && signature->num_labels > 0) labels = signature->num_labels;
  }
  const bool classify = labels.value_or(1) > 1;
  SetParameter(&m.config, "task", classify ? "classify" : "rerank");
  SetParameter(&m.config, "score_activation", classify ? "softmax" : "sigmoid");
  if (signature) {
    if (auto s = NormalizeModelConfig(file, *signature, &m.config, repository_options.normalize); !s.ok()) return s;
    if (auto s = ValidateModelConfig(file, m.config, &*signature); !s.ok()) return s;
  }
  return m;
}

}  // namespace tide::config
