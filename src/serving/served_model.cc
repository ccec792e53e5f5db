#include "serving/served_model.h"

#include "common/error.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_echo.h"
#include "serving/warmup_shapes.h"
#include "spdlog/spdlog.h"

namespace tide::serving {

namespace {

batching::QueuePolicy ToQueuePolicy(const ModelQueuePolicy& p) {
  batching::QueuePolicy q;
  q.timeout_action = p.timeout_action() == ModelQueuePolicy::DELAY ? batching::TimeoutAction::kDelay
                                                                    : batching::TimeoutAction::kReject;
  q.default_timeout = std::chrono::microseconds(p.default_timeout_microseconds());
  q.allow_timeout_override = p.allow_timeout_override();
  q.max_queue_size = p.max_queue_size();
  return q;
}

}  // namespace

std::vector<size_t> DefaultSequenceBuckets(size_t max_sequence_length) {
  std::vector<size_t> buckets;
  for (size_t b : kDefaultSequenceBuckets) {
    if (b < max_sequence_length) buckets.push_back(b);
  }
  size_t step = 64;
  for (size_t b = 512 + step; b < max_sequence_length; b += step) {
    buckets.push_back(b);
    if (b == 16 * step) step *= 2;  // 1024: steps of 128; 2048: 256; ...
  }
  buckets.push_back(max_sequence_length);
  return buckets;
}

size_t DefaultBatchSaturationTokens(uint64_t weight_flops_per_token) {
  if (weight_flops_per_token == 0) return 0;
  const double tokens = kBatchSaturationFlops / static_cast<double>(weight_flops_per_token);
  if (tokens >= kBatchSaturationMaxTokens) return kBatchSaturationMaxTokens;
  return std::max<size_t>(16, static_cast<size_t>(tokens));
}

namespace {

// Triton's dynamic_batching block plus tide's token budget, batch saturation and shape buckets.
batching::BatcherOptions MakeBatcherOptions(const config::ModelConfig& config, const config::TideParameters& params,
                                            size_t max_sequence_length, size_t max_batch_tokens,
                                            uint64_t weight_flops_per_token) {
  batching::BatcherOptions o;
  o.max_batch_size = static_cast<size_t>(std::max(config.max_batch_size(), 1));
  o.max_batch_tokens = std::max<size_t>(params.max_batch_tokens.value_or(max_batch_tokens), max_sequence_length);
  o.saturation_tokens = params.batch_saturation_tokens
                            ? static_cast<size_t>(*params.batch_saturation_tokens)
                            : DefaultBatchSaturationTokens(weight_flops_per_token);
  o.sequence_buckets.clear();
  if (params.sequence_buckets.empty()) {
    o.sequence_buckets = DefaultSequenceBuckets(max_sequence_length);
  } else {
    for (int64_t b : params.sequence_buckets) {
      if (static_cast<size_t>(b) < max_sequence_length) o.sequence_buckets.push_back(static_cast<size_t>(b));
    }
    o.sequence_buckets.push_back(max_sequence_length);
  }
  for (int64_t size : params.allowed_batch_sizes) o.allowed_batch_sizes.push_back(static_cast<size_t>(size));
  if (params.max_padding_ratio) o.max_padding_ratio = *params.max_padding_ratio;
  o.group_by_length = params.batch_grouping == config::BatchGrouping::kLength;
  o.pad_to_longest_row = params.batch_padding == config::BatchPadding::kLongest;
  if (config.has_dynamic_batching()) {
    const ModelDynamicBatching& db = config.dynamic_batching();
    o.max_queue_delay = std::chrono::microseconds(db.max_queue_delay_microseconds());
    for (int32_t size : db.preferred_batch_size()) o.preferred_batch_sizes.push_back(static_cast<size_t>(size));
    o.priority_levels = static_cast<int>(db.priority_levels());
    o.default_priority_level = static_cast<int>(db.default_priority_level());
    if (db.has_default_queue_policy()) o.default_queue_policy = ToQueuePolicy(db.default_queue_policy());
    for (const auto& [level, policy] : db.priority_queue_policy()) {
      o.priority_queue_policy[static_cast<int>(level)] = ToQueuePolicy(policy);
    }
  }
  return o;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServedModel>> ServedModel::Create(std::shared_ptr<const LoadedModel> loaded,
                                                                 BackendFactory backends,
                                                                 const ServedModelOptions& options) {
  if (loaded == nullptr || loaded->tokenizer == nullptr || !backends) {
    return absl::InvalidArgumentError("ServedModel::Create: no loaded model, tokenizer or backend factory");
  }
  std::unique_ptr<ServedModel> m(new ServedModel());
  m->loaded_ = loaded;
  m->backends_ = backends;
  static std::atomic<uint64_t> generations{0};
  m->generation_ = generations.fetch_add(1, std::memory_order_relaxed) + 1;
  const LoadedModel& lm = *loaded;
  // Every per-model metric is labelled (model, version): two versions served side by side keep
  // their own gauges and counters, and a sum over version is the model's total.
  const std::string version_label = std::to_string(lm.version);
  m->metrics_ = options.metrics;
  const std::string& config_file = lm.config_file;

  if (lm.parameters.breaker_enabled()) {
    guard::CircuitBreakerOptions bo;
    bo.p99_threshold = std::chrono::milliseconds(lm.parameters.breaker_p99_ms);
    bo.error_rate_threshold = lm.parameters.breaker_error_rate;
    bo.queue_fullness_threshold = lm.parameters.breaker_queue_fullness;
    bo.latency_window = std::chrono::seconds(lm.parameters.breaker_window_s);
    bo.open_duration = std::chrono::seconds(lm.parameters.breaker_open_s);
    bo.half_open_probes = static_cast<int>(lm.parameters.breaker_probes);
    bo.min_samples = lm.parameters.breaker_min_samples;
    metrics::Gauge* state_gauge =
        m->metrics_ != nullptr ? m->metrics_->breaker_state->WithLabels({lm.name, version_label}) : nullptr;
    ServingMetrics* mx = m->metrics_;
    bo.on_transition = [name = lm.name, version_label, state_gauge, mx](
                           guard::BreakerState from, guard::BreakerState to, std::string_view reason) {
      spdlog::warn("model {} version {}: circuit breaker {} -> {} ({})", EscapeForLog(name), version_label,
                   guard::BreakerStateName(from), guard::BreakerStateName(to), EscapeForLog(reason));
      if (state_gauge != nullptr) state_gauge->Set(static_cast<double>(to));
      if (mx != nullptr) {
        mx->breaker_transitions->WithLabels({name, version_label, std::string(guard::BreakerStateName(to))})->Increment();
      }
    };
    auto breaker = guard::CircuitBreaker::Create(std::move(bo));
    if (!breaker.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(config_file, ": parameters[\"breaker_*\"]: ",
                                                     breaker.status().message()));
    }
    m->breaker_ = *std::move(breaker);
    if (state_gauge != nullptr) state_gauge->Set(0);
  }

  const batching::BatcherOptions batcher_options_in =
      MakeBatcherOptions(lm.config, lm.parameters, lm.max_sequence_length, options.max_batch_tokens,
                         lm.weight_flops_per_token);
  // max_queue_size is enforced per request here (a rerank request's rows are admitted together or
  // not at all), not per row by the batcher, which would split a request.
  batching::BatcherOptions batcher_options = batcher_options_in;
  m->max_batch_tokens_ = batcher_options.max_batch_tokens;
  m->batch_token_cap_ = batcher_options.batch_token_cap();
  m->max_batch_size_ = batcher_options.max_batch_size;
  m->max_queue_size_ = batcher_options.default_queue_policy.max_queue_size;
  batcher_options.default_queue_policy.max_queue_size = 0;
  for (auto& [level, policy] : batcher_options.priority_queue_policy) policy.max_queue_size = 0;
  batching::Batcher<RowTask>::Options bo;
  bo.batching = batcher_options;
  auto batcher = batching::Batcher<RowTask>::Create(std::move(bo));
  if (!batcher.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(config_file, ": dynamic_batching: ", batcher.status().message()));
  }
  m->batcher_ = *std::move(batcher);

  int instances = 0;
  for (const ModelInstanceGroup& g : lm.config.instance_group()) instances += std::max(g.count(), 1);
  instances = std::max(instances, 1);

  StatisticsCounters* stats = m->statistics_.get();
  BatchObserver observer = [stats](const batching::Batch<RowTask>& b, Clock::duration took, int) {
    const uint64_t ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count());
    stats->execution_count.fetch_add(1, std::memory_order_relaxed);
    stats->inference_count.fetch_add(b.size(), std::memory_order_relaxed);
    stats->last_inference_ms.store(std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::system_clock::now().time_since_epoch()).count(),
                                   std::memory_order_relaxed);
    absl::MutexLock lock(&stats->mu);
    auto& entry = stats->batch_stats[b.size()];
    entry.first += 1;
    entry.second += ns;
  };
  if (m->metrics_ != nullptr) {
    ServingMetrics* mx = m->metrics_;
    metrics::Histogram* size_h = mx->batch_size->WithLabels({lm.name, version_label});
    metrics::Histogram* tokens_h = mx->batch_tokens->WithLabels({lm.name, version_label});
    metrics::Counter* real_c = mx->real_tokens->WithLabels({lm.name, version_label});
    metrics::Counter* padded_c = mx->padded_tokens->WithLabels({lm.name, version_label});
    metrics::Counter* prefix_c = mx->prompt_prefix_tokens->WithLabels({lm.name, version_label});
    observer = [size_h, tokens_h, real_c, padded_c, prefix_c, base = std::move(observer)](
                   const batching::Batch<RowTask>& b, Clock::duration took, int instance) {
      base(b, took, instance);
      size_h->Observe(static_cast<double>(b.size()));
      tokens_h->Observe(static_cast<double>(b.padded_tokens));
      real_c->Increment(static_cast<double>(b.real_tokens));
      padded_c->Increment(static_cast<double>(b.padded_tokens));
      if (b.prompt_prefix_tokens > 0) prefix_c->Increment(static_cast<double>(b.prompt_prefix_tokens));
    };
  }

  const std::vector<BatchShape> warmup = WarmupShapes(lm.config, batcher_options);
  const int64_t pad_id = lm.tokenizer->pad_id();
  const auto warm_start = std::chrono::steady_clock::now();
  batching::InstancePoolOptions po;
  po.instance_count = instances;
  po.shutdown_grace = options.shutdown_grace;
  m->shutdown_grace_ = options.shutdown_grace;
  po.worker_nice = options.inference_nice;
  auto pool = batching::InstancePool<RowTask>::Create(
      po, m->batcher_.get(),
      [&](int instance) -> absl::StatusOr<std::unique_ptr<batching::BatchRunner<RowTask>>> {
        auto backend = backends(lm, instance);
        if (!backend.ok()) return backend.status();
        auto runner = std::make_unique<ModelRunner>(*std::move(backend), pad_id, instance, observer, lm.name,
                                                     lm.version, options.batch_trace, lm.precision);
        if (absl::Status s = runner->Warmup(warmup); !s.ok()) {
          return absl::Status(s.code(), absl::StrCat(s.message(), " (if the model accepts fewer positions, set the "
                                                                  "max_sequence_length parameter in config.pbtxt)"));
        }
        return std::unique_ptr<batching::BatchRunner<RowTask>>(std::move(runner));
      });
  if (!pool.ok()) {
    return absl::Status(pool.status().code(),
                        absl::StrCat(lm.name, " version ", lm.version, ": ", pool.status().message()));
  }
  m->pool_ = *std::move(pool);
  const double warm_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - warm_start).count();
  spdlog::info("model {} version {}: {} instance(s) loaded and warmed up ({} shapes each) in {:.0f} ms; "
               "max_sequence_length {}, max_batch_size {}, max_batch_tokens {}, batch_saturation_tokens {}, "
               "max_queue_delay {} us",
               EscapeForLog(lm.name), lm.version, instances, warmup.size(), warm_ms, lm.max_sequence_length,
               batcher_options.max_batch_size, batcher_options.max_batch_tokens, batcher_options.saturation_tokens,
               batcher_options.max_queue_delay.count());
  if (m->metrics_ != nullptr) m->metrics_->model_ready->WithLabels({lm.name, std::to_string(lm.version)})->Set(1);
  return m;
}

ServedModel::~ServedModel() { Shutdown(); }

void ServedModel::Submit(std::vector<tokenizer::Encoding>& rows, const RowTask::Admission& admission,
                         InferenceCallback done) {
  const auto submitted = std::chrono::steady_clock::now();
  StatisticsCounters* stats = statistics_.get();
  guard::CircuitBreaker* breaker = breaker_.get();
  // Every outcome goes through here exactly once: Triton statistics and the breaker's window.
  InferenceCallback finish = [stats, breaker, submitted, done = std::move(done)](
                                 absl::StatusOr<InferenceResult> result) mutable {
    const auto latency = std::chrono::steady_clock::now() - submitted;
    const uint64_t ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(latency).count());
    (result.ok() ? stats->success_count : stats->fail_count).fetch_add(1, std::memory_order_relaxed);
    (result.ok() ? stats->success_ns : stats->fail_ns).fetch_add(ns, std::memory_order_relaxed);
    if (result.ok()) {
      // Triton counts queue and compute once per request that ran, with its own times.
      auto to_ns = [](Clock::duration d) {
        return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
      };
      stats->request_count.fetch_add(1, std::memory_order_relaxed);
      stats->queue_ns.fetch_add(to_ns(result->timings.queue), std::memory_order_relaxed);
      stats->request_compute_ns.fetch_add(to_ns(result->timings.inference), std::memory_order_relaxed);
    }
    if (breaker != nullptr) {
      // A client that left is not the model's failure; everything else that failed is.
      const bool ok = result.ok() || result.status().code() == absl::StatusCode::kCancelled;
      breaker->Record({latency, ok});
    }
    std::move(done)(std::move(result));
  };
  if (rows.empty()) return std::move(finish)(errors::InvalidInput("no inputs to run"));
  if (shut_down_.load()) {
    return std::move(finish)(errors::Unavailable(absl::StrCat("model ", loaded_->name, " is shutting down")));
  }
  if (max_queue_size_ > 0) {
    const size_t queued = batcher_->Stats().queued_tasks;
    if (breaker != nullptr) breaker->ObserveQueue(static_cast<double>(queued + rows.size()) / max_queue_size_);
    // An empty queue takes any request, so one larger than max_queue_size is not refused forever.
    if (queued > 0 && queued + rows.size() > max_queue_size_) {
      return std::move(finish)(errors::Unavailable(
          absl::StrCat("queue of model ", loaded_->name, " is full (max_queue_size ", max_queue_size_, ")")));
    }
  }
  auto request = std::make_shared<InferenceRequest>(rows.size(), loaded_->signature.num_labels, std::move(finish));
  if (admission.deadline != Clock::time_point::max()) deadlines_->Schedule(admission.deadline, request);
  for (size_t i = 0; i < rows.size(); ++i) {
    auto task = std::make_unique<RowTask>(request, i, std::move(rows[i]), admission);
    if (absl::Status s = batcher_->Submit(task); !s.ok()) {
      // Rows already queued see the request finished and are dropped unrun as cancelled.
      request->Fail(std::move(s));
      return;
    }
  }
  // Live rows wait now: a shadow batch running beside them stops (one atomic load without one).
  live_preemption_->LiveRowsQueued();
}

ServedModel::Stats ServedModel::GetStats() const {
  Stats s;
  s.batcher = batcher_->Stats();
  s.instances = pool_->Stats();
  return s;
}

std::vector<std::string> ServedModel::LabelNames(int64_t count) const {
  if (count >= 0 && loaded_->labels.size() == static_cast<size_t>(count)) return loaded_->labels;
  std::vector<std::string> labels;
  for (int64_t i = 0; i < count; ++i) labels.push_back(absl::StrCat("LABEL_", i));
  return labels;
}

api::ModelStatistics ServedModel::Statistics() const {
  const StatisticsCounters& st = *statistics_;
  api::ModelStatistics out;
  out.name = loaded_->name;
  out.version = std::to_string(loaded_->version);
  out.last_inference_ms = st.last_inference_ms.load();
  out.inference_count = st.inference_count.load();
  out.execution_count = st.execution_count.load();
  out.success = {st.success_count.load(), st.success_ns.load()};
  out.fail = {st.fail_count.load(), st.fail_ns.load()};
  const uint64_t ran = st.request_count.load();
  out.queue = {ran, st.queue_ns.load()};
  out.compute_input = {ran, 0};
  out.compute_infer = {ran, st.request_compute_ns.load()};
  out.compute_output = {ran, 0};
  absl::MutexLock lock(&st.mu);
  for (const auto& [size, entry] : st.batch_stats) {
    out.batch_stats.push_back({size, {entry.first, entry.second}});
  }
  return out;
}

void ServedModel::Shutdown() { Shutdown(std::chrono::steady_clock::now() + shutdown_grace_); }

void ServedModel::Shutdown(std::chrono::steady_clock::time_point deadline) {
  if (shut_down_.exchange(true)) return;
  if (metrics_ != nullptr) metrics_->model_ready->WithLabels({loaded_->name, std::to_string(loaded_->version)})->Set(0);
  if (pool_) pool_->StopWithin(deadline - std::chrono::steady_clock::now());
}

}  // namespace tide::serving
