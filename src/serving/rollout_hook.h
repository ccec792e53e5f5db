// tide::serving::RolloutHook — the narrow hook between the request path and gray release: which
// version answers a call, and what a rollout sees of a live answer. RolloutCoordinator
// (serving/rollout_coordinator.h) implements it; admission and the scoring pipeline only hold this
// interface (null: no rollouts), so each is built and tested without one.
//
// Contract:
//  - Pick(call, name, version) is every version choice of an admitted call. A named `version` is
//    that version, and the call is marked Call::named_version (it bypasses the rollout: never
//    split, never compared). An empty version goes where the model's rollout sends it (canary
//    share, sticky by the call's StickyValue of the rollout's sticky_header; after a rollback the
//    stable version, after a promotion the candidate), else the newest loaded version. `name`
//    empty: the default model.
//  - StickyHeaders(): the lower-case request headers whose values admission keeps on a Call
//    (empty, without allocating, while no rollout is sticky).
//  - Tracks(model): the version is the stable or the candidate of a running rollout; its answers
//    must reach Watch (so the score cache alone never answers for it).
//  - Watch(call, model, mirror) is called before a live answer's rows are queued: null
//    when the version is not tracked. Otherwise the rollout may also offer `mirror` to the other
//    version's shadow lane (the one place that chooses "the other version"); the caller then calls
//    Submitted() once the live rows are queued and Answered(...) exactly once with the live answer.
//    `mirror`'s views need only live until Watch returns.
//  - Watch marks the call's rollout arm (Call::rollout_arm: kArmStable or kArmCanary) when the
//    version is tracked and the call did not name its version.
//  - Thread-safe; Answered may run on any thread (the instance thread that finished the rows).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "serving/call.h"
#include "serving/scoring.h"
#include "serving/served_model.h"
#include "serving/tensor_rows.h"
#include "tokenizer/tokenizer.h"

namespace tide::serving {

// The arms of a rollout, as traces name them (tide.rollout.arm): the live answer's side, and the
// shadow comparison's (serving/shadow_trace.h).
inline constexpr char kArmStable[] = "stable";
inline constexpr char kArmCanary[] = "canary";
inline constexpr char kArmShadow[] = "shadow";

// What the live answer scores, for the other version to score the same: a rerank's pairs, or
// token rows (KServe tensors) and the inputs they belong to.
struct MirrorRequest {
  std::string_view query;
  std::span<const std::string_view> documents;
  PairOptions options;
  bool raw_scores = false;
  const std::vector<tokenizer::Encoding>* rows = nullptr;  // set: token rows instead of pairs
  const TensorWindows* windows = nullptr;                  // with rows: which input each row is (may be null)
};

// A rollout's view of one live answer.
class AnswerWatch {
 public:
  virtual ~AnswerWatch() = default;
  // The live rows are queued: a shadow of the same request may start now.
  virtual void Submitted() = 0;
  // The live answer: its status, whether a fallback answered, and (OK, not degraded) what is
  // compared: a rerank's document scores, or the token rows' logits (one label, folded per input;
  // an embedding model's vectors [rows, dim]).
  virtual void Answered(const absl::Status& status, bool degraded, std::span<const float> scores) = 0;
};

class RolloutHook {
 public:
  virtual ~RolloutHook() = default;
  virtual absl::StatusOr<std::shared_ptr<ServedModel>> Pick(const Call& call, std::string_view name,
                                                            std::string_view version) const = 0;
  virtual std::vector<std::string> StickyHeaders() const = 0;
  virtual bool Tracks(const ServedModel& model) const = 0;
  virtual std::shared_ptr<AnswerWatch> Watch(const Call& call, const ServedModel& model,
                                             const MirrorRequest& mirror) = 0;
};

}  // namespace tide::serving
