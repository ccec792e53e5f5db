// tide::Task — what a model's answer means: one relevance score per (query, document) pair
// (`rerank`, a cross-encoder) or labels with probabilities per input (`classify`). A model
// parameter (`task`, config::TideParameters) that serving and the edges act on. Header-only.
#pragma once

namespace tide {

enum class Task { kRerank, kClassify };

}  // namespace tide
