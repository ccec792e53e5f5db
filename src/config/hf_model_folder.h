// tide::config — a HuggingFace model folder (a git clone of a model repository on the Hub) read as
// one model of the repository, so that `tide serve --model <folder>` serves it in one command, as
// TEI's --model-id does for a local path.
//
// Contract:
//  - LoadHuggingFaceFolder reads <folder>/config.json, <folder>/tokenizer.json and an ONNX file and
//    builds the RepositoryModel that a model repository entry with this config.pbtxt would give:
//      name: served_model_name, else the folder's name
//      parameters task            "rerank" for 1 label, "classify" for more
//                 score_activation "sigmoid" for 1 label, "softmax" for more (score = P(last label))
//                 tokenizer        "tokenizer.json" (relative to the folder)
//                 max_sequence_length  max_position_embeddings, less RoBERTa's padding offset
//                                      (pad_token_id + 1, default 2) for roberta / xlm-roberta /
//                                      camembert, capped at max_sequence_length_cap; unset when
//                                      config.json has no max_position_embeddings
//    with one version, 1, whose model file is the ONNX file; inputs, outputs and max_batch_size are
//    completed from the ONNX file by Normalize, as for a repository entry without config.pbtxt.
//  - A sentence-transformers folder (IsSentenceTransformersFolder) is served from its export only.
//  - The ONNX file: onnx_file when set (a path relative to the folder, tried as given and then
//    under onnx/, e.g. "model_quantized.onnx" finds onnx/model_quantized.onnx), else
//    onnx/model.onnx, else model.onnx (the layouts of Optimum / sentence-transformers exports).
//  - A folder with PyTorch or safetensors weights but no ONNX file is served from its export in
//    <export_dir>/<name> (a model repository entry written by tools/export_model.py). When there is
//    none yet, `export_weights` (if set) is called once to write it there (the CLI runs
//    tools/export_model.py, see cli/hf_export.h); without it, or when it fails, the answer is
//    FAILED_PRECONDITION whose message holds the exact export command (ExportCommand). An export
//    older than the weights file is stale: exported again through `export_weights`, or refused
//    with the command when it is unset.
//  - The number of labels comes from config.json (id2label, else num_labels); when it has neither,
//    from the ONNX output. A config.json whose labels disagree with each other or with the ONNX
//    output is INVALID_ARGUMENT.
//  - Decoder-only LLM rerankers (config.json architectures): Qwen3ForSequenceClassification and
//    Qwen2ForSequenceClassification are served by their `score` head with no flag;
//    Qwen3ForCausalLM and Qwen2ForCausalLM only with task "rerank" (`--task rerank`: the export
//    scores logit(YES) - logit(NO) of the rerank tokens, `rerank_tokens` "YES,NO" or the export
//    tool's default), else INVALID_ARGUMENT saying to pass --task rerank, except in a
//    sentence-transformers folder without a task: that is a decoder embedding model (Qwen3-Embedding's
//    config.json names Qwen3ForCausalLM), exported as one; any other *ForCausalLM is
//    INVALID_ARGUMENT naming the architecture and the supported ones. rerank_tokens without a
//    CausalLM folder is INVALID_ARGUMENT. These checks run before the ONNX file or the export is
//    looked for. A decoder is always served from its export (whose config.pbtxt carries the
//    prompt), which gets --task / --rerank-tokens in ExportCommand and export_weights.
//  - Errors name the file and, where one is at fault, the key: NOT_FOUND for a missing folder or
//    file (listing the paths tried), INVALID_ARGUMENT for a bad config.json. Blocking file I/O;
//    thread-safe when options.read_signature is.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "config/model_repository.h"

namespace tide::config {

struct HuggingFaceFolderOptions {
  std::filesystem::path folder;        // the HF model folder (required)
  std::string served_model_name;       // empty: the folder's name
  std::string onnx_file;               // empty: onnx/model.onnx, then model.onnx
  std::filesystem::path export_dir;    // empty: <folder>/.tide
  int64_t max_sequence_length_cap = 512;  // longer position tables are served up to this length
  std::string task;                    // "" or "rerank" (--task): needed by a *ForCausalLM folder
  std::string rerank_tokens;           // "YES,NO" (--rerank-tokens); empty: the export tool's default
  // Writes the export of the folder's weights into ExportDir(options)/ServedModelName(options);
  // unset: a folder without ONNX file is refused with the export command.
  std::function<absl::Status(const HuggingFaceFolderOptions& options)> export_weights;
};

// What tide takes from a HuggingFace config.json.
struct HuggingFaceConfig {
  std::string model_type;                      // "" when absent
  std::vector<std::string> architectures;      // "architectures"; empty when absent
  std::vector<std::string> labels;             // id2label in id order; empty when absent
  std::optional<int64_t> num_labels;           // id2label's size, else num_labels, else unset
  std::optional<int64_t> max_sequence_length;  // derived and capped as described above
};

// Parses config.json text; `file` names it in errors.
absl::StatusOr<HuggingFaceConfig> ParseHuggingFaceConfig(std::string_view json_text, std::string_view file,
                                                         int64_t max_sequence_length_cap = 512);

absl::StatusOr<RepositoryModel> LoadHuggingFaceFolder(const HuggingFaceFolderOptions& options,
                                                      const RepositoryOptions& repository_options = {});

// The served name (served_model_name, else the folder's name) and the export folder
// (export_dir, else <folder>/.tide).
std::string ServedModelName(const HuggingFaceFolderOptions& options);
std::filesystem::path ExportDir(const HuggingFaceFolderOptions& options);

// The command that exports the folder's PyTorch / safetensors weights to where
// LoadHuggingFaceFolder looks for them:
//   /usr/bin/python3 tools/export_model.py --checkpoint <folder> --name <name> --repository <export dir>
// followed by --task <task> and --rerank-tokens <tokens> when those are set.
std::string ExportCommand(const HuggingFaceFolderOptions& options);

// A sentence-transformers folder (modules.json: Transformer, Pooling[, Normalize]): an embedding
// model, always served from its export (tools/export_model.py pools in the graph and writes task
// embed, pooling, normalize and the prompts into its config.pbtxt); its own ONNX files are not used.
bool IsSentenceTransformersFolder(const std::filesystem::path& folder);

// The decoder architectures tide serves, and whether `architecture` is a causal LM.
bool IsSupportedDecoderArchitecture(std::string_view architecture);
bool IsCausalLmArchitecture(std::string_view architecture);

// The task / rerank-token checks above for a parsed config.json (`file` names it in errors).
absl::Status CheckDecoderOptions(const HuggingFaceConfig& config, const std::string& file,
                                 const HuggingFaceFolderOptions& options);

}  // namespace tide::config
