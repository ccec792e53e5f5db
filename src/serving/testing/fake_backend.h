// tide::serving::testing — a served model without files or ONNX Runtime, for in-process tests of
// the serving layer: what the loader would produce for a small 1-label reranker (Loaded), scheduled
// on fake backends (FakeBackend) that a test controls through a shared BackendControl (the logit
// every row gets or a function of the batch, a gate that holds batches, failures, a poisoned token,
// the shapes run, and a count of backends closed). Each fake has a RunTerminator like OrtBackend's;
// with BackendControl::block_until_terminated its Run waits until it is terminated (then
// CANCELLED, as ONNX Runtime's terminated Run) or the flag is cleared.
//
// Contract: test-only (target tide_serving_testing; the layering check refuses an include of a
// testing/ header from non-test code); header-only; the fakes are thread-safe as the instance pool
// uses them.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "serving/model_loader.h"
#include "serving/served_model.h"
#include "tokenizer/testing/small_bert_tokenizer.h"

namespace tide::serving::testing {

inline constexpr absl::Duration kHang = absl::Seconds(30);  // generous bound for hangs only

inline std::unique_ptr<const tokenizer::Tokenizer> TestTokenizer(
    const std::vector<std::string>& words = {"a", "b", "c", "d", "e", "f"}) {
  return tokenizer::testing::SmallBertTokenizer(words);
}

// What the loader would produce for a 1-label reranker, without files.
struct ModelSpec {
  std::string name = "m";
  int64_t version = 1;
  int max_queue_size = 0;
  int max_batch_size = 0;  // config.pbtxt's (0: unset, one row per batch)
  config::TideParameters parameters = {};
  size_t max_sequence_length = 16;
  // The tokenizer's words (ids 4, 5, ... in this order; "##x" entries are word-piece continuations).
  std::vector<std::string> vocabulary = {"a", "b", "c", "d", "e", "f"};
  uint64_t tokenizer_digest = 0;  // LoadedModel::tokenizer_digest (another file: another digest)
};

inline std::shared_ptr<const LoadedModel> Loaded(const ModelSpec& spec) {
  auto m = std::make_shared<LoadedModel>();
  m->name = spec.name;
  m->version = spec.version;
  m->config_file = "test/config.pbtxt";
  m->config.set_name(spec.name);
  if (spec.max_queue_size > 0) {
    m->config.mutable_dynamic_batching()->mutable_default_queue_policy()->set_max_queue_size(spec.max_queue_size);
  }
  if (spec.max_batch_size > 0) m->config.set_max_batch_size(spec.max_batch_size);
  m->parameters = spec.parameters;
  m->tokenizer = TestTokenizer(spec.vocabulary);
  m->tokenizer_digest = spec.tokenizer_digest;
  m->signature.num_labels = 1;
  m->max_sequence_length = spec.max_sequence_length;
  m->token_input_limits.vocab_size = 10;
  return m;
}

// Shared by a test and the backends it hands out: every logit is `value`; `gate` (when armed)
// holds every batch until opened; `fail` fails every batch; `destroyed` counts backends gone.
struct BackendControl {
  using Shape = std::pair<int64_t, int64_t>;  // {batch, seq_len} of a batch run

  float value = 1.0f;
  std::atomic<bool> armed{false};
  std::atomic<bool> fail{false};
  absl::Status failure = absl::InternalError("engine failed");  // what `fail` answers
  absl::Notification entered;  // a gated batch is running
  absl::Notification gate;
  std::atomic<int> destroyed{0};
  std::atomic<int> rows_run{0};  // rows of every batch run
  // >= 0: a row holding this token id gets logit +5, any other -5 (instead of `value`).
  std::atomic<int64_t> decisive_token{-1};
  // >= 0: a batch holding this token id fails as ONNX Runtime does on an out-of-range id.
  std::atomic<int64_t> poison_token{-1};
  // The backends' signature (set before the first backend is made): num_labels logits per row.
  ModelSignature signature;
  // Set (before the first backend is made): computes a batch's logits instead of `value` and
  // `decisive_token` (out->batch and out->num_labels are set, out->values sized, zeroed).
  std::function<void(const runtime::TokenBatch&, runtime::Logits*)> logits;
  absl::Notification all_destroyed;
  int instances = 1;
  // Set: Run blocks until its terminator is told to stop (answers CANCELLED) or this is cleared.
  std::atomic<bool> block_until_terminated{false};
  std::atomic<int> blocked_runs{0};     // Runs that blocked so
  std::atomic<int> terminated_runs{0};  // Runs answered CANCELLED for a Terminate

  // The shapes of the batches run by Run and by RunAlone (a batch formed alone), in order.
  std::vector<Shape> shapes() const {
    absl::MutexLock lock(&mu);
    return shapes_run;
  }
  std::vector<Shape> alone_shapes() const {
    absl::MutexLock lock(&mu);
    return alone_shapes_run;
  }
  void ClearShapes() {
    absl::MutexLock lock(&mu);
    shapes_run.clear();
    alone_shapes_run.clear();
  }
  void RecordShape(const runtime::TokenBatch& b, bool alone) {
    absl::MutexLock lock(&mu);
    (alone ? alone_shapes_run : shapes_run).push_back({b.batch, b.seq_len});
  }

 private:
  mutable absl::Mutex mu;
  std::vector<Shape> shapes_run ABSL_GUARDED_BY(mu);
  std::vector<Shape> alone_shapes_run ABSL_GUARDED_BY(mu);
};

// Like OrtBackend's: a flag Terminate sets and Reset clears; lock-free.
class FakeTerminator : public runtime::RunTerminator {
 public:
  void Terminate() noexcept override { terminated_.store(true); }
  void Reset() noexcept override { terminated_.store(false); }
  bool terminated() const noexcept override { return terminated_.load(); }

 private:
  std::atomic<bool> terminated_{false};
};

class FakeBackend : public runtime::ModelBackend {
 public:
  explicit FakeBackend(std::shared_ptr<BackendControl> c) : c_(std::move(c)), signature_(c_->signature) {}
  ~FakeBackend() override {
    if (c_->destroyed.fetch_add(1) + 1 == c_->instances) c_->all_destroyed.Notify();
  }
  absl::Status Run(const runtime::TokenBatch& b, runtime::Logits* out) override {
    c_->RecordShape(b, /*alone=*/false);
    return Execute(b, out);
  }
  absl::Status RunAlone(const runtime::TokenBatch& b, runtime::Logits* out) override {
    c_->RecordShape(b, /*alone=*/true);
    return Execute(b, out);
  }
  const ModelSignature& signature() const override { return signature_; }
  runtime::RunTerminator* terminator() override { return &terminator_; }

 private:
  absl::Status Execute(const runtime::TokenBatch& b, runtime::Logits* out) {
    if (c_->block_until_terminated.load()) {
      c_->blocked_runs++;
      const absl::Time give_up = absl::Now() + kHang;
      while (c_->block_until_terminated.load() && !terminator_.terminated() && absl::Now() < give_up) {
        absl::SleepFor(absl::Microseconds(200));
      }
    }
    if (terminator_.terminated()) {
      c_->terminated_runs++;
      return absl::CancelledError("run terminated");
    }
    if (c_->armed.load()) {
      if (!c_->entered.HasBeenNotified()) c_->entered.Notify();
      c_->gate.WaitForNotificationWithTimeout(kHang);
    }
    c_->rows_run += static_cast<int>(b.batch);
    if (c_->fail.load()) return c_->failure;
    if (const int64_t poison = c_->poison_token.load();
        poison >= 0 && std::find(b.input_ids.begin(), b.input_ids.end(), poison) != b.input_ids.end()) {
      return absl::InvalidArgumentError("indices element out of data bounds");
    }
    const int64_t labels = signature_.num_labels > 0 ? signature_.num_labels : 1;
    out->batch = b.batch;
    out->num_labels = labels;
    if (c_->logits) {
      out->values.assign(b.batch * labels, 0.0f);
      c_->logits(b, out);
      return absl::OkStatus();
    }
    out->values.assign(b.batch * labels, c_->value);
    if (const int64_t token = c_->decisive_token.load(); token >= 0) {
      for (int64_t r = 0; r < b.batch; ++r) {
        const auto row = b.input_ids.begin() + r * b.seq_len;
        const float logit = std::find(row, row + b.seq_len, token) != row + b.seq_len ? 5.0f : -5.0f;
        std::fill_n(out->values.begin() + r * labels, labels, logit);
      }
    }
    return absl::OkStatus();
  }

  std::shared_ptr<BackendControl> c_;
  ModelSignature signature_;
  FakeTerminator terminator_;
};

inline BackendFactory Fake(std::shared_ptr<BackendControl> c) {
  return [c](const LoadedModel&, int) -> absl::StatusOr<std::unique_ptr<runtime::ModelBackend>> {
    return std::unique_ptr<runtime::ModelBackend>(std::make_unique<FakeBackend>(c));
  };
}

// Live instances on `live`, a shadow lane's backend (kShadowLaneInstance) on `lane`.
inline BackendFactory FakeWithLane(std::shared_ptr<BackendControl> live, std::shared_ptr<BackendControl> lane) {
  return [live, lane](const LoadedModel&, int instance) -> absl::StatusOr<std::unique_ptr<runtime::ModelBackend>> {
    return std::unique_ptr<runtime::ModelBackend>(
        std::make_unique<FakeBackend>(instance == kShadowLaneInstance ? lane : live));
  };
}

inline std::unique_ptr<ServedModel> Served(const ModelSpec& spec, std::shared_ptr<BackendControl> c) {
  ServedModelOptions o;
  o.shutdown_grace = std::chrono::milliseconds(5000);
  auto m = ServedModel::Create(Loaded(spec), Fake(std::move(c)), o);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

inline std::vector<tokenizer::Encoding> Rows(size_t n) {
  std::vector<tokenizer::Encoding> rows(n);
  for (auto& e : rows) {
    e.ids = {2, 4, 3};
    e.attention_mask = {1, 1, 1};
    e.type_ids = {0, 0, 0};
  }
  return rows;
}

}  // namespace tide::serving::testing
