#include "serving/token_input_limits.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "onnx/onnx_pb.h"
#include "onnx_graph/model_io.h"

namespace tide::serving {

namespace {

bool PassesValues(std::string_view op) {
  return op == "Cast" || op == "Identity" || op == "Unsqueeze" || op == "Squeeze" || op == "Reshape";
}

class EmbeddingFinder {
 public:
  explicit EmbeddingFinder(const onnx::GraphProto& g) : g_(g) {
    for (const onnx::TensorProto& t : g.initializer()) tables_[t.name()] = &t;
    for (int i = 0; i < g.node_size(); ++i) {
      const onnx::NodeProto& n = g.node(i);
      for (const std::string& in : n.input()) consumers_[in].push_back(i);
      for (const std::string& out : n.output()) producer_[out] = i;
      if (n.op_type() == "Constant" && n.output_size() == 1) {
        for (const onnx::AttributeProto& a : n.attribute()) {
          if (a.name() == "value" && a.has_t()) tables_[n.output(0)] = &a.t();
        }
      }
    }
  }

  // Rows of the smallest table a Gather indexes with `input` (through value-passing ops).
  std::optional<int64_t> RowsIndexedBy(const std::string& input) const {
    std::optional<int64_t> rows;
    std::vector<std::string> frontier = {input};
    std::vector<std::string> seen;
    while (!frontier.empty()) {
      const std::string v = frontier.back();
      frontier.pop_back();
      if (std::find(seen.begin(), seen.end(), v) != seen.end()) continue;
      seen.push_back(v);
      auto it = consumers_.find(v);
      if (it == consumers_.end()) continue;
      for (int i : it->second) {
        const onnx::NodeProto& n = g_.node(i);
        if (PassesValues(n.op_type()) && n.input_size() > 0 && n.input(0) == v) {
          for (const std::string& out : n.output()) frontier.push_back(out);
        } else if (n.op_type() == "Gather" && n.input_size() >= 2 && n.input(1) == v) {
          int64_t axis = 0;
          for (const onnx::AttributeProto& a : n.attribute()) {
            if (a.name() == "axis") axis = a.i();
          }
          if (axis != 0) continue;
          if (std::optional<int64_t> r = TableRows(n.input(0)); r) rows = rows ? std::min(*rows, *r) : *r;
        }
      }
    }
    return rows;
  }

 private:
  std::optional<int64_t> TableRows(std::string name) const {
    for (int hops = 0; hops < 4; ++hops) {
      if (auto t = tables_.find(name); t != tables_.end()) {
        if (t->second->dims_size() < 1 || t->second->dims(0) < 1) return std::nullopt;
        return t->second->dims(0);
      }
      auto p = producer_.find(name);
      if (p == producer_.end()) return std::nullopt;
      const onnx::NodeProto& n = g_.node(p->second);
      const std::string_view op = n.op_type();
      if ((op != "DequantizeLinear" && op != "Cast" && op != "Identity") || n.input_size() < 1) return std::nullopt;
      name = n.input(0);
    }
    return std::nullopt;
  }

  const onnx::GraphProto& g_;
  std::unordered_map<std::string, const onnx::TensorProto*> tables_;
  std::unordered_map<std::string, std::vector<int>> consumers_;
  std::unordered_map<std::string, int> producer_;
};

}  // namespace

absl::StatusOr<GraphEmbeddingRows> ReadEmbeddingRows(const std::string& model_path,
                                                     const ModelSignature& signature) {
  absl::StatusOr<onnx::ModelProto> model = onnx_graph::ReadModelFile(model_path);
  if (!model.ok()) return model.status();
  return ReadEmbeddingRows(*model, signature);
}

GraphEmbeddingRows ReadEmbeddingRows(const onnx::ModelProto& model, const ModelSignature& signature) {
  EmbeddingFinder finder(model.graph());
  GraphEmbeddingRows rows;
  rows.input_ids = finder.RowsIndexedBy(signature.input_ids_name);
  if (!signature.token_type_ids_name.empty()) rows.token_type_ids = finder.RowsIndexedBy(signature.token_type_ids_name);
  return rows;
}

absl::StatusOr<ResolvedTokenInputLimits> ResolveTokenInputLimits(const ModelSignature& signature,
                                                                 const tokenizer::Tokenizer& tokenizer,
                                                                 const absl::StatusOr<GraphEmbeddingRows>& graph,
                                                                 std::optional<int64_t> token_type_vocab_size) {
  ResolvedTokenInputLimits r;
  r.limits.vocab_size = static_cast<int64_t>(tokenizer.vocab_size());
  std::string ids_note;
  if (graph.ok() && graph->input_ids && *graph->input_ids < r.limits.vocab_size) {
    ids_note = absl::StrCat("; input_ids limited to the graph's ", *graph->input_ids,
                            " embedding rows (the tokenizer has ", r.limits.vocab_size, " tokens)");
    r.limits.vocab_size = *graph->input_ids;
    r.log_is_warning = true;
  }
  if (signature.token_type_ids_name.empty()) {
    if (token_type_vocab_size) {
      return absl::FailedPreconditionError(
          "parameters[\"token_type_vocab_size\"]: the model has no token_type_ids input");
    }
    r.limits.type_vocab_size = 1;
    r.log = absl::StrCat("token input limits: input_ids < ", r.limits.vocab_size,
                         "; token_type_ids 0 only (the model takes none)", ids_note);
    return r;
  }
  const std::optional<int64_t> from_graph = graph.ok() ? graph->token_type_ids : std::nullopt;
  // What the model's own tokenizer produces for a pair: 0, or 0 and 1.
  int64_t tokenizer_types = 1;
  {
    tokenizer::Encoding e;
    if (tokenizer.Encode("a", std::string_view("b"), tokenizer::EncodeOptions{}, &e).ok()) {
      for (int64_t t : e.type_ids) tokenizer_types = std::max(tokenizer_types, t + 1);
    }
  }
  if (from_graph && tokenizer_types > *from_graph) {
    ids_note = absl::StrCat(ids_note, "; WARNING: the tokenizer gives pairs token type ", tokenizer_types - 1,
                            " but the graph has ", *from_graph, " token-type row(s): text pairs will fail in the engine");
    r.log_is_warning = true;
  }
  std::string source;
  if (token_type_vocab_size) {
    r.limits.type_vocab_size = *token_type_vocab_size;
    source = "the token_type_vocab_size parameter";
    if (from_graph && *token_type_vocab_size > *from_graph) {
      source = absl::StrCat(source, ", above the graph's ", *from_graph,
                            " token-type rows: rows with larger ids fail in the engine (answered 500, alone)");
      r.log_is_warning = true;
    }
  } else if (from_graph) {
    r.limits.type_vocab_size = *from_graph;
    source = "the graph's token-type embedding";
  } else {
    r.limits.type_vocab_size = tokenizer_types;
    source = absl::StrCat("the ids the tokenizer produces; not derivable from the graph (",
                          graph.ok() ? "no Gather of token_type_ids over a table" : graph.status().message(),
                          "): set the token_type_vocab_size parameter to widen");
    r.log_is_warning = true;
  }
  r.log = absl::StrCat("token input limits: input_ids < ", r.limits.vocab_size, "; token_type_ids < ",
                       r.limits.type_vocab_size, " (", source, ")", ids_note);
  return r;
}

}  // namespace tide::serving
