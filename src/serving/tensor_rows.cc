#include "serving/tensor_rows.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "serving/long_documents.h"
#include "serving/scoring.h"
#include "serving/served_model.h"

namespace tide::serving {

namespace {

// `parameters.instruction` of a KServe request (a decoder-only reranker's prompt): nullopt when
// absent; 422 when it is not a string.
absl::StatusOr<std::optional<std::string>> InstructionParameter(const api::Parameters& parameters) {
  auto it = parameters.find("instruction");
  if (it == parameters.end()) return std::optional<std::string>();
  const std::string* value = std::get_if<std::string>(&it->second);
  if (value == nullptr) return errors::InvalidInput("parameters.instruction must be a string");
  return std::optional<std::string>(*value);
}

// Encodes a (text, text_pair) row as `model`'s prompt with `instruction` (resolved already).
std::function<absl::Status(std::string_view, std::string_view, tokenizer::Encoding*)> PromptPairEncoder(
    const ServedModel& model, std::optional<std::string> instruction) {
  return [&model, instruction = std::move(instruction)](std::string_view text, std::string_view pair,
                                                        tokenizer::Encoding* out) -> absl::Status {
    auto encoder = MakePromptEncoder(model, instruction, text);
    if (!encoder.ok()) return encoder.status();
    absl::Status s = encoder->Encode(pair, model.parameters().truncation_direction, out);
    if (s.code() == absl::StatusCode::kFailedPrecondition) return errors::InvalidInput(s.message());
    return s;
  };
}

int64_t ValueAt(const api::Tensor& t, size_t i) {
  if (const auto* v = std::get_if<std::vector<int64_t>>(&t.data)) return (*v)[i];
  return std::get<std::vector<int32_t>>(t.data)[i];
}

absl::Status OutOfRange(const api::Tensor& t, int64_t row, int64_t pos, int64_t value, const std::string& accepted) {
  return errors::InvalidInput(
      absl::StrCat(t.name, "[", row, "][", pos, "] = ", value, " is outside ", accepted));
}

absl::Status RowsFromTokenTensors(const TensorRowsModel& model, const api::Tensor* ids, const api::Tensor* mask,
                                  const api::Tensor* types, std::vector<tokenizer::Encoding>* rows) {
  for (const api::Tensor* t : {ids, mask, types}) {
    if (t == nullptr) continue;
    if (t->datatype != api::DataType::kInt64 && t->datatype != api::DataType::kInt32) {
      return errors::InvalidInput(absl::StrCat("input '", t->name, "' must be INT64 or INT32"));
    }
    if (t->shape.size() != 2) {
      return errors::InvalidInput(absl::StrCat("input '", t->name, "' must have shape [batch, sequence]"));
    }
    if (t->shape != ids->shape) {
      return errors::InvalidInput(absl::StrCat("input '", t->name, "' must have the shape of '", ids->name, "'"));
    }
  }
  const int64_t batch = ids->shape[0], seq = ids->shape[1];
  if (batch < 1 || seq < 1) return errors::InvalidInput(absl::StrCat(ids->name, " must not be empty"));
  if (static_cast<size_t>(seq) > model.max_sequence_length) {
    return errors::InvalidInput(absl::StrCat("sequence length ", seq, " exceeds the model's max_sequence_length ",
                                                      model.max_sequence_length));
  }
  const size_t elements = static_cast<size_t>(batch) * static_cast<size_t>(seq);
  for (const api::Tensor* t : {ids, mask, types}) {
    if (t != nullptr && api::TensorDataSize(t->data) != elements) {
      return errors::InvalidInput(
          absl::StrCat("input '", t->name, "' has ", api::TensorDataSize(t->data), " elements but its shape needs ", elements));
    }
  }
  const int64_t vocab = model.limits.vocab_size;
  const int64_t type_vocab = model.limits.type_vocab_size;
  const std::string vocab_range = absl::StrCat("the vocabulary (0..", vocab - 1, ")");
  const std::string type_range = absl::StrCat("the model's token types (0..", type_vocab - 1, ")");
  rows->resize(static_cast<size_t>(batch));
  for (int64_t r = 0; r < batch; ++r) {
    tokenizer::Encoding& e = (*rows)[r];
    e.clear();
    bool attends = false;
    for (int64_t c = 0; c < seq; ++c) {
      const size_t i = static_cast<size_t>(r * seq + c);
      const int64_t id = ValueAt(*ids, i);
      if (id < 0 || id >= vocab) return OutOfRange(*ids, r, c, id, vocab_range);
      int64_t m = 1;
      if (mask != nullptr) {
        m = ValueAt(*mask, i);
        if (m != 0 && m != 1) return OutOfRange(*mask, r, c, m, "{0, 1}");
      }
      attends = attends || m == 1;
      int64_t type = 0;
      if (types != nullptr) {
        type = ValueAt(*types, i);
        if (type < 0 || type >= type_vocab) return OutOfRange(*types, r, c, type, type_range);
      }
      e.ids.push_back(id);
      e.attention_mask.push_back(m);
      e.type_ids.push_back(type);
    }
    if (!attends) {
      return errors::InvalidInput(absl::StrCat(mask->name, "[", r, "] attends to no token (all 0)"));
    }
    e.untruncated_length = e.ids.size();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RowsFromTensors(const TensorRowsModel& model, const api::InferRequest& request,
                             std::vector<tokenizer::Encoding>* rows, Clock::duration* tokenize_time) {
  const api::Tensor* ids = nullptr;
  const api::Tensor* mask = nullptr;
  const api::Tensor* types = nullptr;
  const api::Tensor* text = nullptr;
  const api::Tensor* text_pair = nullptr;
  const ModelSignature& sig = *model.signature;
  for (const api::Tensor& t : request.inputs) {
    const api::Tensor** slot = nullptr;
    if (t.name == sig.input_ids_name) slot = &ids;
    else if (t.name == sig.attention_mask_name) slot = &mask;
    else if (t.name == "token_type_ids") slot = &types;
    else if (t.name == "text") slot = &text;
    else if (t.name == "text_pair") slot = &text_pair;
    else return errors::InvalidInput(absl::StrCat("unexpected input '", t.name, "' for model ", std::string(model.name)));
    if (*slot != nullptr) return errors::InvalidInput(absl::StrCat("input '", t.name, "' given twice"));
    *slot = &t;
  }
  if (ids != nullptr) {
    if (text != nullptr || text_pair != nullptr) {
      return errors::InvalidInput("send either token tensors or text inputs, not both");
    }
    return RowsFromTokenTensors(model, ids, mask, types, rows);
  }
  if (mask != nullptr || types != nullptr) {
    return errors::InvalidInput(absl::StrCat("token tensors need '", sig.input_ids_name, "'"));
  }
  if (text == nullptr || model.tokenizer == nullptr) {
    return errors::InvalidInput(absl::StrCat("model ", std::string(model.name), " expects '", sig.input_ids_name,
                                                      "' (INT64/INT32 [batch, sequence]) or 'text' (BYTES [batch])"));
  }
  const auto* texts = std::get_if<std::vector<std::string>>(&text->data);
  if (texts == nullptr || texts->empty()) return errors::InvalidInput("input 'text' must be non-empty BYTES");
  const std::vector<std::string>* pairs = nullptr;
  if (text_pair != nullptr) {
    pairs = std::get_if<std::vector<std::string>>(&text_pair->data);
    if (pairs == nullptr || pairs->size() != texts->size()) {
      return errors::InvalidInput("input 'text_pair' must be BYTES with as many elements as 'text'");
    }
  }
  const auto start = std::chrono::steady_clock::now();
  tokenizer::EncodeOptions opts;
  opts.max_length = model.max_sequence_length;
  rows->resize(texts->size());
  for (size_t i = 0; i < texts->size(); ++i) {
    std::optional<std::string_view> pair;
    if (pairs != nullptr) pair = (*pairs)[i];
    if (pair.has_value() && model.encode_pair) {
      if (absl::Status s = model.encode_pair((*texts)[i], *pair, &(*rows)[i]); !s.ok()) return s;
      continue;
    }
    if (absl::Status s = model.tokenizer->Encode((*texts)[i], pair, opts, &(*rows)[i]); !s.ok()) return s;
  }
  *tokenize_time = std::chrono::steady_clock::now() - start;
  return absl::OkStatus();
}

absl::Status RowsFromTensors(const ServedModel& model, const api::InferRequest& request,
                             std::vector<tokenizer::Encoding>* rows, Clock::duration* tokenize_time) {
  TensorRowsModel m;
  m.name = model.name();
  m.signature = &model.signature();
  m.tokenizer = &model.tokenizer();
  m.limits = model.token_input_limits();
  m.max_sequence_length = model.max_sequence_length();
  auto instruction = InstructionParameter(request.parameters);
  if (!instruction.ok()) return instruction.status();
  // An instruction the model cannot take is refused; one a template needs and lacks, at its pairs.
  if (instruction->has_value()) {
    if (absl::Status s = ResolveInstruction(model, *instruction).status(); !s.ok()) return s;
  }
  if (model.parameters().prompt_template.has_value()) m.encode_pair = PromptPairEncoder(model, *instruction);
  return RowsFromTensors(m, request, rows, tokenize_time);
}

absl::StatusOr<std::optional<LongDocuments>> LongDocumentsParameter(const api::Parameters& parameters) {
  auto it = parameters.find("long_documents");
  if (it == parameters.end()) return std::optional<LongDocuments>();
  const std::string* name = std::get_if<std::string>(&it->second);
  std::optional<LongDocuments> mode = name == nullptr ? std::nullopt : ParseLongDocuments(*name);
  if (!mode.has_value()) {
    return errors::InvalidInput(
        "parameters.long_documents must be \"truncate\", \"chunk_max\" or \"chunk_mean\"");
  }
  return mode;
}

absl::Status RowsFromTensors(const ServedModel& model, const api::InferRequest& request,
                             std::optional<LongDocuments> requested, std::vector<tokenizer::Encoding>* rows,
                             TensorWindows* windows, Clock::duration* tokenize_time) {
  *windows = TensorWindows{};
  const LongDocuments mode = requested.value_or(model.parameters().long_documents);
  windows->mode = mode;
  if (mode == LongDocuments::kTruncate) return RowsFromTensors(model, request, rows, tokenize_time);
  const api::Tensor* text = nullptr;
  const api::Tensor* text_pair = nullptr;
  for (const api::Tensor& t : request.inputs) {
    if (t.name == "text") text = &t;
    if (t.name == "text_pair") text_pair = &t;
  }
  if (text == nullptr || text_pair == nullptr) {
    // The model's default applies where it can; a request that asks for it is told why not.
    if (!requested.has_value()) return RowsFromTensors(model, request, rows, tokenize_time);
    return errors::InvalidInput(absl::StrCat(
        "parameters.long_documents ", std::string(LongDocumentsName(mode)),
        " needs the text inputs 'text' (the query) and 'text_pair' (the document); token tensors and text alone "
        "are scored as sent"));
  }
  // The checks of the plain path (names, types, sizes) first, on a copy without the windows.
  const auto* texts = std::get_if<std::vector<std::string>>(&text->data);
  const auto* pairs = std::get_if<std::vector<std::string>>(&text_pair->data);
  if (texts == nullptr || texts->empty() || pairs == nullptr || pairs->size() != texts->size()) {
    return RowsFromTensors(model, request, rows, tokenize_time);  // answers the same 422 as without
  }
  for (const api::Tensor& t : request.inputs) {
    if (&t != text && &t != text_pair) return RowsFromTensors(model, request, rows, tokenize_time);
  }
  auto instruction = InstructionParameter(request.parameters);
  if (!instruction.ok()) return instruction.status();
  // An instruction the model cannot take is refused; one a template needs and lacks, at its pairs.
  if (instruction->has_value()) {
    if (absl::Status s = ResolveInstruction(model, *instruction).status(); !s.ok()) return s;
  }
  std::function<absl::Status(std::string_view, std::string_view, tokenizer::Encoding*)> encode_pair;
  if (model.parameters().prompt_template.has_value()) encode_pair = PromptPairEncoder(model, *instruction);
  const auto start = std::chrono::steady_clock::now();
  ChunkOptions chunk = ChunkOptionsFor(model, mode);
  chunk.instruction = *instruction;
  tokenizer::EncodeOptions opts;
  opts.max_length = model.max_sequence_length();
  rows->clear();
  std::vector<size_t> owner;
  bool split = false;
  for (size_t i = 0; i < texts->size(); ++i) {
    const std::string_view document = (*pairs)[i];
    DocumentWindows w;
    if (absl::Status s = SplitLongDocuments(model, (*texts)[i], std::span<const std::string_view>(&document, 1),
                                            chunk, &w);
        !s.ok()) {
      // It names the document as a rerank's texts[0]; here it is text_pair[i].
      std::string message(s.message());
      if (message.rfind("texts[0]", 0) == 0) message = absl::StrCat("text_pair[", i, "]", message.substr(8));
      return errors::InvalidInput(message);
    }
    split = split || w.split;
    for (std::string_view window : w.windows) {
      rows->emplace_back();
      if (encode_pair) {
        if (absl::Status s = encode_pair((*texts)[i], window, &rows->back()); !s.ok()) return s;
      } else if (absl::Status s = model.tokenizer().Encode((*texts)[i], window, opts, &rows->back()); !s.ok()) {
        return s;
      }
      owner.push_back(i);
    }
  }
  *tokenize_time = std::chrono::steady_clock::now() - start;
  windows->inputs = texts->size();
  if (split) windows->owner = std::move(owner);
  return absl::OkStatus();
}

void FoldWindowRows(const TensorWindows& windows, InferenceResult* result) {
  if (!windows.split()) return;
  const size_t labels = static_cast<size_t>(result->num_labels);
  std::vector<float> folded(windows.inputs * labels, 0.0f);
  std::vector<size_t> count(windows.inputs, 0);
  for (size_t row = 0; row < windows.owner.size(); ++row) {
    const size_t input = windows.owner[row];
    for (size_t l = 0; l < labels; ++l) {
      const float v = result->logits[row * labels + l];
      float& out = folded[input * labels + l];
      if (windows.mode == LongDocuments::kChunkMax) {
        out = count[input] == 0 ? v : std::max(out, v);
      } else {
        out += v;
      }
    }
    ++count[input];
  }
  if (windows.mode == LongDocuments::kChunkMean) {
    for (size_t i = 0; i < windows.inputs; ++i) {
      for (size_t l = 0; l < labels; ++l) folded[i * labels + l] /= static_cast<float>(std::max<size_t>(count[i], 1));
    }
  }
  result->logits = std::move(folded);
  result->rows = static_cast<int64_t>(windows.inputs);
}

}  // namespace tide::serving
