#include "serving/model_runner.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "common/error_echo.h"
#include "spdlog/spdlog.h"

namespace tide::serving {

ModelRunner::ModelRunner(std::unique_ptr<runtime::ModelBackend> backend, int64_t pad_id, int instance,
                         BatchObserver observer, std::string model, int64_t version,
                         batching::BatchTraceHook batch_trace, std::string precision)
    : backend_(std::move(backend)),
      pad_id_(pad_id),
      instance_(instance),
      with_type_ids_(!backend_->signature().token_type_ids_name.empty()),
      observer_(std::move(observer)),
      model_(std::move(model)),
      version_(version),
      batch_trace_(std::move(batch_trace)),
      precision_(std::move(precision)) {}

std::optional<batching::TraceLink> ModelRunner::TraceBatch(const batching::Batch<RowTask>& batch,
                                                           Clock::duration took) const {
  if (!batch_trace_) return std::nullopt;
  batching::BatchTraceFacts facts;
  for (const auto& task : batch.tasks) {
    const std::optional<batching::TraceLink>& link = task->trace();
    if (!link.has_value() || !link->sampled()) continue;
    if (std::find(facts.requests.begin(), facts.requests.end(), *link) == facts.requests.end()) {
      facts.requests.push_back(*link);
    }
  }
  if (facts.requests.empty()) return std::nullopt;  // nothing sampled rode in it: no span, no cost
  facts.model = model_;
  facts.version = version_;
  facts.precision = precision_;
  facts.instance = instance_;
  facts.rows = batch.tasks.size();
  facts.padded_rows = std::max(batch.padded_batch_size, batch.tasks.size());
  facts.padded_sequence_length = static_cast<size_t>(input_.seq_len);
  facts.real_tokens = batch.real_tokens;
  facts.padded_tokens = batch.padded_tokens;
  facts.alone = batch.alone;
  facts.inference = took;
  return batch_trace_(facts);
}

absl::Status ModelRunner::BackendFailure(const batching::Batch<RowTask>& batch, const absl::Status& engine) {
  const Clock::time_point now = SteadyClock::Get()->Now();
  if (now - log_window_start_ >= std::chrono::seconds(1)) {
    log_window_start_ = now;
    logged_in_window_ = 0;
  }
  if (logged_in_window_ < kMaxErrorLogsPerSecond) {
    ++logged_in_window_;
    spdlog::error("model {} version {} instance {}: inference failed on a batch of {} row(s) [{} x {}]{}: {}",
                  EscapeForLog(model_),
                  version_, instance_, batch.tasks.size(), input_.batch, input_.seq_len,
                  suppressed_logs_ > 0 ? absl::StrCat(" (", suppressed_logs_, " similar failure(s) not logged)") : "",
                  EscapeForLog(engine.ToString()));
    suppressed_logs_ = 0;
  } else {
    ++suppressed_logs_;
  }
  return errors::Backend(absl::StrCat("inference failed for model ", model_, " version ", version_));
}

void ModelRunner::Fill(const batching::Batch<RowTask>& batch) {
  const int64_t rows = static_cast<int64_t>(std::max(batch.padded_batch_size, batch.tasks.size()));
  int64_t seq = static_cast<int64_t>(batch.padded_sequence_length);
  for (const auto& task : batch.tasks) seq = std::max<int64_t>(seq, task->encoding().ids.size());
  input_.Resize(rows, seq, with_type_ids_);
  // The token states only for a batch with a row that asks (TEI's /embed_all): /embed pays nothing.
  input_.token_states = std::any_of(batch.tasks.begin(), batch.tasks.end(),
                                    [](const auto& task) { return task->wants_token_states(); });
  std::fill(input_.input_ids.begin(), input_.input_ids.end(), pad_id_);
  for (int64_t r = 0; r < rows; ++r) {
    const size_t base = static_cast<size_t>(r * seq);
    if (r >= static_cast<int64_t>(batch.tasks.size())) {
      input_.attention_mask[base] = 1;  // a padding row attends to one pad token: no empty softmax
      continue;
    }
    const tokenizer::Encoding& e = batch.tasks[r]->encoding();
    std::copy(e.ids.begin(), e.ids.end(), input_.input_ids.begin() + base);
    std::copy(e.attention_mask.begin(), e.attention_mask.end(), input_.attention_mask.begin() + base);
    if (with_type_ids_) std::copy(e.type_ids.begin(), e.type_ids.end(), input_.token_type_ids.begin() + base);
  }
}

absl::Status ModelRunner::Run(batching::Batch<RowTask>& batch) {
  const Clock::time_point start = SteadyClock::Get()->Now();
  Fill(batch);
  // A lone batch (nothing else running or queued) may use the idle instances' cores too.
  absl::Status s = batch.alone ? backend_->RunAlone(input_, &logits_) : backend_->Run(input_, &logits_);
  if (!s.ok()) return BackendFailure(batch, s);
  const Clock::duration took = SteadyClock::Get()->Now() - start;
  if (logits_.batch < static_cast<int64_t>(batch.tasks.size()) || logits_.num_labels < 1) {
    return BackendFailure(batch, absl::InternalError(absl::StrCat("model returned ", logits_.batch, " rows of ",
                                                                  logits_.num_labels, " logits for a batch of ",
                                                                  batch.tasks.size())));
  }
  if (input_.token_states && (logits_.hidden < 1 || logits_.token_states.size() !=
                                  static_cast<size_t>(logits_.batch * input_.seq_len * logits_.hidden))) {
    return BackendFailure(batch, absl::InternalError(absl::StrCat("model returned ", logits_.token_states.size(),
                                                                  " token-state values for a batch asking for them")));
  }
  batch.prompt_prefix_tokens = static_cast<size_t>(logits_.prompt_prefix_tokens) * batch.tasks.size();
  if (observer_) observer_(batch, took, instance_);
  const std::optional<batching::TraceLink> span = TraceBatch(batch, took);
  const batching::TraceLink* batch_span = span.has_value() ? &*span : nullptr;
  for (size_t i = 0; i < batch.tasks.size(); ++i) {
    // Rows are right-padded (Fill): a row's real tokens are its first positions.
    const float* states = batch.tasks[i]->wants_token_states()
                              ? logits_.states_of(static_cast<int64_t>(i), input_.seq_len)
                              : nullptr;
    batch.tasks[i]->Complete(&logits_.values[i * logits_.num_labels], batch.queue_durations[i], took, batch_span,
                             states, logits_.hidden);
    batch.tasks[i].reset();
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::Warmup(const std::vector<BatchShape>& shapes) {
  // RunAlone (a wider session, if the backend has one) on the one-row shapes and the largest:
  // lone batches are mostly small at light load, and the arena is shared with Run's session
  // when the model shares weights, so every shape again would only double the start-up.
  size_t largest = 0;
  for (size_t i = 1; i < shapes.size(); ++i) {
    if (shapes[i].batch * shapes[i].seq_len > shapes[largest].batch * shapes[largest].seq_len) largest = i;
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    const BatchShape& shape = shapes[i];
    input_.Resize(shape.batch, shape.seq_len, with_type_ids_);
    std::fill(input_.input_ids.begin(), input_.input_ids.end(), pad_id_);
    std::fill(input_.attention_mask.begin(), input_.attention_mask.end(), 1);
    absl::Status s = backend_->Run(input_, &logits_);
    if (s.ok() && (shape.batch == 1 || i == largest)) s = backend_->RunAlone(input_, &logits_);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("warm-up at batch ", shape.batch, " x sequence ", shape.seq_len,
                                                 ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace tide::serving
