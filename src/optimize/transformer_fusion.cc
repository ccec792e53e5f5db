#include "optimize/transformer_fusion.h"

#include "absl/strings/str_cat.h"
#include "onnx_graph/graph_util.h"
#include "optimize/attention_fusion.h"
#include "optimize/graph_rewrite.h"
#include "optimize/padding_mask_in_keys.h"
#include "optimize/pooled_token.h"
#include "optimize/prompt_prefix.h"
#include "optimize/skip_layer_norm_fusion.h"
#include "optimize/tide_attention.h"
#include "optimize/tide_elementwise.h"

namespace tide::optimize {

std::string FusionReport::Summary() const {
  const char* bf16 = tide_attention_bf16 ? ", BF16 products" : "";
  const std::string kernel = tide_attention == 0 ? ""
                             : tide_attention == attention_fused
                                 ? absl::StrCat(" (tide kernel", bf16, ")")
                                 : absl::StrCat(" (", tide_attention, " on the tide kernel", bf16, ")");
  const std::string elementwise =
      tide_bias_gelu + tide_layer_norm == 0
          ? ""
          : absl::StrCat(", ", tide_bias_gelu, " bias-gelu + ", tide_layer_norm, " layernorm on tide kernels");
  const std::string causal =
      tide_causal_attention == 0
          ? ""
          : absl::StrCat(", ", tide_causal_attention, " causal attention (tide kernel",
                         tide_causal_attention_bf16 ? ", BF16 products" : "", ")");
  const std::string pruned =
      pruned_last_layer == 0 ? "" : absl::StrCat(", last layer on the pooled token (", pruned_last_layer, " nodes)");
  const std::string prefix = prompt_prefix_layers == 0
                                 ? ""
                                 : absl::StrCat(", shared prompt prefix inputs (", prompt_prefix_layers, " layers)");
  return absl::StrCat(attention_fused, " attention", kernel, ", ", skip_layer_norm_fused, " skip-layernorm", causal,
                      elementwise, pruned, prefix, "; ", nodes_before, " -> ", nodes_after, " nodes");
}

absl::StatusOr<FusionReport> FuseTransformer(const FusionOptions& options, onnx::ModelProto* model) {
  if (!model->has_graph()) return absl::InvalidArgumentError("the model has no graph");
  onnx::GraphProto* g = model->mutable_graph();
  for (const auto& n : g->node()) {
    if (n.domain() == "com.microsoft" &&
        (n.op_type() == "MultiHeadAttention" || n.op_type() == "Attention" || n.op_type() == "SkipLayerNormalization")) {
      return absl::FailedPreconditionError(
          absl::StrCat("the model is already fused (node ", n.name().empty() ? n.output(0) : n.name(), " is com.microsoft.",
                       n.op_type(), ")"));
    }
  }
  FusionReport report;
  report.nodes_before = g->node_size();
  const int opset = static_cast<int>(onnx_graph::OpsetVersion(*model, ""));
  if (options.attention) report.attention_fused = FuseAttention(g, opset, &report.skipped);
  if (options.skip_layer_norm) report.skip_layer_norm_fused = FuseSkipLayerNorm(g, &report.skipped);
  if (options.tide_attention && report.attention_fused > 0) {
    report.tide_attention = UseTideAttention(model, options.tide_attention_bf16, &report.skipped);
  }
  if (options.tide_attention) {
    report.tide_causal_attention = UseTideCausalAttention(model, options.tide_causal_attention_bf16, &report.skipped);
  }
  report.tide_attention_bf16 = options.tide_attention_bf16 && report.tide_attention > 0;
  report.tide_causal_attention_bf16 = options.tide_causal_attention_bf16 && report.tide_causal_attention > 0;
  if (options.padding_mask_in_keys && report.attention_fused > report.tide_attention) MovePaddingMaskIntoKeys(g, opset, &report.skipped);
  if (options.tide_elementwise) {
    const TideElementwiseCount moved = UseTideElementwise(model, &report.skipped);
    report.tide_bias_gelu = moved.bias_gelu;
    report.tide_layer_norm = moved.layer_norm;
  }
  if (options.prune_last_layer && report.tide_attention > 0) {
    RemoveDeadNodes(g);  // the replaced nodes still read the values the pass follows
    report.pruned_last_layer = PruneLastLayer(model, &report.skipped);
  }
  if (options.prompt_prefix && report.tide_causal_attention > 0) {
    RemoveDeadNodes(g);  // GroupQueryAttention's unread present outputs must not count as readers
    report.prompt_prefix_layers = AddPromptPrefixInputs(model, &report.skipped);
  }
  if (report.fused() > 0) {
    onnx_graph::EnsureOpset(model, "com.microsoft", 1);
    RemoveDeadNodes(g);
    onnx_graph::DropUnusedInitializers(g);
  }
  report.nodes_after = g->node_size();
  return report;
}

}  // namespace tide::optimize
