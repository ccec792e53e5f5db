// tide::Task — what a model's answer means: one relevance score per (query, document) pair
// (`rerank`, a cross-encoder), labels with probabilities per input (`classify`) or one vector per
// input (`embed`, a bi-encoder whose graph pools: docs/embeddings.md). A model
// parameter (`task`, config::TideParameters) that serving and the edges act on. Header-only.
#pragma once

namespace tide {

enum class Task { kRerank, kClassify, kEmbed };

}  // namespace tide
