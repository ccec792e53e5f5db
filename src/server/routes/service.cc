#include "server/routes/service.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/cohere_rerank.h"
#include "api/kserve_infer.h"
#include "api/kserve_metadata.h"
#include "api/model_statistics.h"
#include "api/rerank.h"
#include "api/status_http.h"
#include "api/tokenize.h"
#include "common/error_echo.h"
#include "config/model_config.h"
#include "nlohmann/json.hpp"
#include "guard/api_key.h"
#include "server/routes/dashboard.h"
#include "server/routes/load_report.h"
#include "server/routes/route_table.h"
#include "server/routes/route_util.h"
#include "serving/fallback.h"
#include "serving/scoring.h"
#include "serving/tensor_rows.h"

namespace tide::server {

namespace {

using serving::Clock;
using Steady = std::chrono::steady_clock;

http::Response JsonResponse(std::string body, int status = 200) {
  http::Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

std::string NextRequestId() {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat("tide-", counter.fetch_add(1, std::memory_order_relaxed) + 1);
}

// KServe parameters arrive as bool/int/double/string; timeouts and priorities must be integers.
absl::StatusOr<std::optional<int64_t>> IntParameter(const api::Parameters& params, std::string_view name) {
  auto it = params.find(name);
  if (it == params.end()) return std::optional<int64_t>();
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return std::optional<int64_t>(*v);
  return absl::FailedPreconditionError(absl::StrCat("parameters.", std::string(name), " must be an integer"));
}

api::DataType ToApi(DataType t) {
  switch (t) {
    case TYPE_BOOL: return api::DataType::kBool;
    case TYPE_INT32: return api::DataType::kInt32;
    case TYPE_INT64: return api::DataType::kInt64;
    case TYPE_FP64: return api::DataType::kFp64;
    case TYPE_STRING: return api::DataType::kBytes;
    default: return api::DataType::kFp32;
  }
}

// The KServe answer carrying `result` as the model's output tensor (JSON, or binary when asked);
// `degraded` (a fallback's result) adds "parameters": {"degraded": true}.
absl::StatusOr<http::Response> InferHttpResponse(const serving::ServedModel& model, const api::InferRequest& request,
                                                 serving::InferenceResult result, bool degraded) {
  api::InferResponse response;
  response.model_name = model.name();
  response.model_version = std::to_string(model.version());
  response.id = request.id;
  if (degraded) response.parameters["degraded"] = true;
  api::Tensor out;
  out.name = model.signature().logits_name;
  out.datatype = api::DataType::kFp32;
  out.shape = {result.rows, result.num_labels};
  out.data = std::move(result.logits);
  response.outputs.push_back(std::move(out));
  auto rendered = api::RenderInferResponse(response, request);
  if (!rendered.ok()) return rendered.status();
  http::Response http_response = JsonResponse(std::move(rendered->body));
  if (rendered->inference_header_content_length.has_value()) {
    http_response.content_type = "application/octet-stream";
    http_response.headers.emplace_back(std::string(api::kInferenceHeaderContentLength),
                                       std::to_string(*rendered->inference_header_content_length));
  }
  return http_response;
}

}  // namespace

bool Service::AdmitRequest(const http::Request& request, ResponseSender* sender) {
  if (draining()) {
    metrics_->shed->WithLabels({"draining"})->Increment();
    sender->SendError(absl::UnavailableError("server is shutting down"));
    return false;
  }
  if (!options_.api_key.empty() && !guard::ApiKeyMatches(request.header("authorization"), options_.api_key)) {
    http::Response r = ErrorResponse(absl::UnauthenticatedError("missing or invalid API key (Authorization: Bearer <key>)"));
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    sender->Send(std::move(r));
    return false;
  }
  if (options_.max_concurrent_requests > 0) {
    std::optional<guard::ConcurrencyLimiter::Permit> permit = limiter_.TryAcquire();
    if (!permit.has_value()) {
      metrics_->shed->WithLabels({"max_concurrent_requests"})->Increment();
      sender->SendError(absl::ResourceExhaustedError(absl::StrCat(
          "too many requests in flight (max_concurrent_requests=", options_.max_concurrent_requests, ")")));
      return false;
    }
    sender->hold(*std::move(permit));
  }
  return true;
}

std::optional<ResponseSender> Service::OpenInference(const http::Request& request, http::Responder respond,
                                                     const char* endpoint) {
  ResponseSender sender(std::move(respond), metrics_, endpoint, request.received_at);
  if (!AdmitRequest(request, &sender)) return std::nullopt;
  return sender;
}

void Service::Offload(http::Request request, ResponseSender sender, Work work) {
  const int64_t estimate = guard::EstimateRequestBytes(request.body.size(), options_.request_memory_factor,
                                                       options_.request_memory_fixed_bytes);
  if (!budget_->Fits(estimate)) {
    metrics_->shed->WithLabels({"max_inflight_bytes"})->Increment();
    http::Response r;
    r.status = 413;
    r.body = api::ErrorBody(absl::OutOfRangeError(absl::StrCat(
        "request of ", request.body.size(), " body bytes is estimated to need ", estimate,
        " bytes while it is parsed and tokenized, more than the whole budget max_inflight_bytes=",
        budget_->capacity_bytes())));
    return sender.Send(std::move(r));
  }
  std::optional<guard::MemoryBudget::Lease> lease = budget_->TryAcquire(estimate);
  if (!lease.has_value()) {
    metrics_->shed->WithLabels({"max_inflight_bytes"})->Increment();
    return sender.SendError(absl::ResourceExhaustedError(absl::StrCat(
        "too many request bytes in flight (max_inflight_bytes=", budget_->capacity_bytes(), "); retry later")));
  }
  struct Job {
    http::Request request;
    ResponseSender sender;
    Keep keep;
    Work work;
  };
  auto job = std::make_shared<Job>(Job{std::move(request), std::move(sender),
                                       std::make_shared<guard::MemoryBudget::Lease>(*std::move(lease)),
                                       std::move(work)});
  serving::WorkPool::Task task = [this, job]() {
    // A request that waited for a worker past its deadline, or whose client left, is not parsed.
    auto admission = MakeAdmission(job->request, options_.default_timeout);
    if (admission.ok()) {
      if (absl::Status s = StillWanted(*admission, "waiting for a tokenization worker"); !s.ok()) {
        return job->sender.SendError(s);
      }
    }
    std::move(job->work)(std::move(job->request), std::move(job->sender), std::move(job->keep));
  };
  // A small body is cheap to parse and tokenize: it takes the light lane, which a worker is kept
  // for, so it never waits behind heavy requests.
  constexpr size_t kLightBodyBytes = 64 * 1024;
  const serving::WorkPool::Lane lane =
      job->request.body.size() <= kLightBodyBytes ? serving::WorkPool::Lane::kLight : serving::WorkPool::Lane::kHeavy;
  if (absl::Status s = pool_->Submit(task, lane); !s.ok()) {
    metrics_->shed->WithLabels({"tokenization_queue"})->Increment();
    job->sender.SendError(s);
  }
}

absl::Status Service::StillWanted(const serving::RowTask::Admission& admission, std::string_view stage) {
  if (admission.client_gone != nullptr && admission.client_gone->IsCancelled()) {
    return absl::CancelledError("the client disconnected");
  }
  if (Steady::now() >= admission.deadline) {
    return absl::DeadlineExceededError(absl::StrCat("the request's deadline passed while ", std::string(stage)));
  }
  return absl::OkStatus();
}

void Service::TrimHeap() {
  // glibc keeps freed chunks of its per-thread arenas; after a burst of large requests that is
  // hundreds of MB of RSS the process no longer uses (bench/results/memory-burst.txt). One trim at
  // a time, on a tokenization worker's light lane rather than on the inference thread that released
  // the last bytes; none while the pool is being destroyed (~Service resets pool_ first).
  if (pool_ == nullptr || trim_pending_.exchange(true)) return;
  serving::WorkPool::Task task = [this] {
    malloc_trim(0);
    trim_pending_.store(false);
  };
  if (!pool_->Submit(task, serving::WorkPool::Lane::kLight).ok()) trim_pending_.store(false);
}

Service::~Service() { pool_.reset(); }

absl::StatusOr<std::unique_ptr<Service>> Service::Create(serving::ModelManager* models,
                                                         serving::ServingMetrics* metrics,
                                                         const ServiceOptions& options) {
  if (models == nullptr || metrics == nullptr) return absl::InvalidArgumentError("models and metrics are required");
  std::unique_ptr<Service> service(new Service(models, metrics, options));
  guard::MemoryBudget::Options budget;
  budget.capacity_bytes = options.max_inflight_bytes;
  budget.trim_above_bytes = options.malloc_trim_above_bytes;
  budget.trim_below_bytes = options.malloc_trim_above_bytes / 8;
  budget.on_drained = [s = service.get()] { s->TrimHeap(); };
  service->budget_ = std::make_unique<guard::MemoryBudget>(std::move(budget));
  serving::WorkPoolOptions pool;
  pool.threads = options.tokenization_workers;
  pool.max_queue = std::max<size_t>(options.tokenization_queue, 1);
  pool.thread_name = "tide-tok";
  auto workers = serving::WorkPool::Create(pool);
  if (!workers.ok()) return workers.status();
  service->pool_ = *std::move(workers);
  if (absl::Status s = service->AddRoutes(); !s.ok()) return s;
  return service;
}

absl::Status Service::AddRoutes() {
  auto plain = [this](void (Service::*fn)(http::Request, http::Responder)) {
    return [this, fn](http::Request r, http::PathParams, http::Responder respond) {
      (this->*fn)(std::move(r), std::move(respond));
    };
  };
  auto with_params = [this](void (Service::*fn)(http::Request, const http::PathParams&, http::Responder)) {
    return [this, fn](http::Request r, http::PathParams p, http::Responder respond) {
      (this->*fn)(std::move(r), p, std::move(respond));
    };
  };
  auto handler = [&](Endpoint endpoint) -> http::RouteHandler {
    switch (endpoint) {
      case Endpoint::kRerank: return plain(&Service::Rerank);
      case Endpoint::kCohereRerank: return plain(&Service::CohereRerank);
      case Endpoint::kTokenize: return plain(&Service::Tokenize);
      case Endpoint::kMetrics: return plain(&Service::Metrics);
      case Endpoint::kServerMetadata: return plain(&Service::ServerMetadata);
      case Endpoint::kLive: return plain(&Service::Live);
      case Endpoint::kReady: return plain(&Service::Ready);
      case Endpoint::kModelMetadata: return with_params(&Service::ModelMetadata);
      case Endpoint::kModelReady: return with_params(&Service::ModelReady);
      case Endpoint::kModelStats: return with_params(&Service::ModelStats);
      case Endpoint::kInfer: return with_params(&Service::Infer);
      case Endpoint::kLoad: return plain(&Service::Load);
      case Endpoint::kRepositoryIndex:
      case Endpoint::kRepositoryLoad:
      case Endpoint::kRepositoryUnload: return RepositoryRouteHandler(options_.repository, endpoint);
      case Endpoint::kDashboard:
        return [](http::Request, http::PathParams, http::Responder respond) {
          std::move(respond)(DashboardResponse());
        };
    }
    return nullptr;
  };
  for (const RouteEntry& e : RouteTable()) {
    if (absl::Status s = router_.Add(e.method, e.pattern, handler(e.endpoint)); !s.ok()) return s;
    if (!e.admin) continue;
    if (absl::Status s = admin_router_.Add(e.method, e.pattern, handler(e.endpoint)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// ---- rerank ------------------------------------------------------------------------------------

void Service::Rerank(http::Request request, http::Responder respond) {
  std::optional<ResponseSender> sender = OpenInference(request, std::move(respond), "rerank");
  if (!sender.has_value()) return;
  Offload(std::move(request), *std::move(sender), [this](http::Request r, ResponseSender s, Keep k) {
    RerankWork(std::move(r), std::move(s), std::move(k));
  });
}

void Service::RerankWork(http::Request request, ResponseSender sender, Keep keep) {
  auto parsed = api::ParseRerankRequest(request.body, options_.limits);
  if (!parsed.ok()) return sender.SendError(parsed.status());
  auto model = models_->Default();
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  auto admission = MakeAdmission(request, options_.default_timeout);
  if (!admission.ok()) return sender.SendError(admission.status());
  auto req = std::make_shared<api::RerankRequest>(*std::move(parsed));
  // A request without truncation_direction gets the model's (its truncation_direction parameter).
  const serving::PairOptions pair_options{
      req->truncate, req->truncation_direction.value_or((*model)->parameters().truncation_direction), std::nullopt};
  ScorePairs(std::move(sender), std::move(keep), *model, *admission, req->query, req->texts, pair_options,
             req->raw_scores, [req](const serving::RerankScores& s) {
               return api::RenderRerankResponse(*req, s.scores, s.fallback != nullptr);
             });
}

void Service::CohereRerank(http::Request request, http::Responder respond) {
  std::optional<ResponseSender> sender = OpenInference(request, std::move(respond), "v1_rerank");
  if (!sender.has_value()) return;
  Offload(std::move(request), *std::move(sender), [this](http::Request r, ResponseSender s, Keep k) {
    CohereRerankWork(std::move(r), std::move(s), std::move(k));
  });
}

void Service::CohereRerankWork(http::Request request, ResponseSender sender, Keep keep) {
  auto parsed = api::ParseCohereRerankRequest(request.body, options_.limits);
  if (!parsed.ok()) return sender.SendError(parsed.status());
  auto model = parsed->model.has_value() && !parsed->model->empty() ? models_->Find(*parsed->model)
                                                                    : models_->Default();
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  auto admission = MakeAdmission(request, options_.default_timeout);
  if (!admission.ok()) return sender.SendError(admission.status());
  auto req = std::make_shared<api::CohereRerankRequest>(*std::move(parsed));
  // Cohere's endpoint always truncates (in the model's truncation_direction); max_tokens_per_doc
  // cuts documents first.
  const serving::PairOptions pair_options{true, (*model)->parameters().truncation_direction, req->max_tokens_per_doc};
  ScorePairs(std::move(sender), std::move(keep), *model, *admission, req->query, req->documents, pair_options,
             /*raw_scores=*/false, [req, name = (*model)->name()](const serving::RerankScores& s) {
               return api::RenderCohereRerankResponse(
                   *req, s.scores, api::CohereRerankResponseInfo{NextRequestId(), name, s.real_tokens, s.fallback != nullptr});
             });
}

void Service::ScorePairs(ResponseSender sender, Keep keep, std::shared_ptr<serving::ServedModel> model,
                         const serving::RowTask::Admission& admission, std::string_view query,
                         const std::vector<std::string>& documents, const serving::PairOptions& pair_options,
                         bool raw_scores, RerankRenderer render) {
  const std::vector<std::string_view> docs(documents.begin(), documents.end());
  serving::ScoreOrFallback(
      std::move(model), admission, query, docs, pair_options, raw_scores, metrics_,
      [&admission] { return StillWanted(admission, "tokenizing"); },
      [sender = std::move(sender), keep = std::move(keep),
       render = std::move(render)](absl::StatusOr<serving::RerankScores> scores) mutable {
        if (!scores.ok()) return sender.SendError(scores.status());
        const Steady::time_point post = Steady::now();
        auto body = render(*scores);
        if (!body.ok()) return sender.SendError(body.status());
        http::Response response = JsonResponse(*std::move(body));
        if (scores->fallback != nullptr) {
          // A fallback's answer: marked, without timing headers (as before the core was split).
          response.headers.emplace_back("x-tide-degraded", scores->fallback);
          return sender.Send(std::move(response));
        }
        serving::StageTimings t = scores->timings;
        t.postprocess = Steady::now() - post;
        t.total = Steady::now() - sender.received_at();
        AddTimingHeaders(t, &response);
        sender.Send(std::move(response), &t);
      });
}

// ---- tokenize ----------------------------------------------------------------------------------

void Service::Tokenize(http::Request request, http::Responder respond) {
  std::optional<ResponseSender> sender = OpenInference(request, std::move(respond), "tokenize");
  if (!sender.has_value()) return;
  Offload(std::move(request), *std::move(sender), [this](http::Request r, ResponseSender s, Keep k) {
    TokenizeWork(std::move(r), std::move(s), std::move(k));
  });
}

void Service::TokenizeWork(http::Request request, ResponseSender sender, Keep keep) {
  auto admission = MakeAdmission(request, options_.default_timeout);
  if (!admission.ok()) return sender.SendError(admission.status());
  auto parsed = api::ParseTokenizeRequest(request.body, options_.limits);
  if (!parsed.ok()) return sender.SendError(parsed.status());
  auto model = models_->Default();
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  const tokenizer::Tokenizer& tok = (*model)->tokenizer();
  tokenizer::EncodeOptions opts;
  opts.max_length = (*model)->max_sequence_length();
  opts.add_special_tokens = parsed->add_special_tokens;
  std::vector<std::vector<api::TokenInfo>> out(parsed->inputs.size());
  tokenizer::Encoding e;
  for (size_t i = 0; i < parsed->inputs.size(); ++i) {
    if (i % serving::kTokenizeChunkDocuments == 0) {
      if (absl::Status s = StillWanted(*admission, "tokenizing"); !s.ok()) return sender.SendError(s);
    }
    const api::TokenizeInput& in = parsed->inputs[i];
    std::optional<std::string_view> pair;
    if (in.text_pair.has_value()) pair = *in.text_pair;
    if (absl::Status s = tok.Encode(in.text, pair, opts, &e); !s.ok()) return sender.SendError(s);
    out[i].reserve(e.ids.size());
    for (int64_t id : e.ids) {
      api::TokenInfo info;
      info.id = id;
      info.text = tok.IdToToken(id).value_or("");
      info.special = tok.IsSpecialToken(id);
      out[i].push_back(std::move(info));
    }
  }
  sender.Send(JsonResponse(api::RenderTokenizeResponse(out)));
}

// ---- KServe v2: health and metadata ---------------------------------------------------------------

void Service::ServerMetadata(http::Request request, http::Responder respond) {
  ResponseSender sender(std::move(respond), metrics_, "server_metadata", request.received_at);
  api::ServerMetadata md;
  md.version = options_.version;
  md.extensions = {"binary_tensor_data", "statistics"};
  sender.Send(JsonResponse(api::RenderServerMetadata(md)));
}

void Service::Live(http::Request request, http::Responder respond) {
  ResponseSender sender(std::move(respond), metrics_, "health_live", request.received_at);
  sender.Send(JsonResponse(R"({"live":true})"));
}

void Service::Ready(http::Request request, http::Responder respond) {
  ResponseSender sender(std::move(respond), metrics_, "health_ready", request.received_at);
  const bool ready = !draining() && models_->AllReady();
  sender.Send(JsonResponse(ready ? R"({"ready":true})" : R"({"ready":false})", ready ? 200 : 503));
}

void Service::Load(http::Request request, http::Responder respond) {
  ResponseSender sender(std::move(respond), metrics_, "load", request.received_at);
  std::vector<batching::BatcherStats> queues;
  for (const auto& model : models_->All()) queues.push_back(model->GetStats().batcher);
  const bool ready = !draining() && models_->AllReady();
  sender.Send(JsonResponse(RenderLoadJson(MakeLoadReport(ready, limiter_.in_flight(), limiter_.max_concurrent_requests(), queues))));
}

void Service::ModelMetadata(http::Request request, const http::PathParams& params, http::Responder respond) {
  ResponseSender sender(std::move(respond), metrics_, "model_metadata", request.received_at);
  if (!CheckApiKey(request, options_.api_key, &sender)) return;
  auto model = models_->Find(params.Get("model"), params.Get("version"));
  if (!model.ok()) return sender.SendError(model.status());
  const serving::ServedModel& m = **model;
  sender.set_model(m.name(), m.version());
  api::ModelMetadata md;
  md.name = m.name();
  for (int64_t v : models_->Versions(m.name())) md.versions.push_back(std::to_string(v));
  md.platform = std::string(config::kOnnxRuntimePlatform);
  const bool batched = m.config().max_batch_size() > 0;
  auto add = [batched](const auto& tensor, std::vector<api::TensorMetadata>* out) {
    api::TensorMetadata t;
    t.name = tensor.name();
    t.datatype = ToApi(tensor.data_type());
    if (batched) t.shape.push_back(-1);
    for (int64_t d : tensor.dims()) t.shape.push_back(d);
    out->push_back(std::move(t));
  };
  for (const auto& in : m.config().input()) add(in, &md.inputs);
  for (const auto& out : m.config().output()) add(out, &md.outputs);
  md.inputs.push_back({"text", api::DataType::kBytes, {-1}});
  md.inputs.push_back({"text_pair", api::DataType::kBytes, {-1}});
  sender.Send(JsonResponse(api::RenderModelMetadata(md)));
}

void Service::ModelReady(http::Request request, const http::PathParams& params, http::Responder respond) {
  ResponseSender sender(std::move(respond), metrics_, "model_ready", request.received_at);
  auto model = models_->Find(params.Get("model"), params.Get("version"));
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  const bool ready = !draining() && (*model)->ready();
  sender.Send(JsonResponse(ready ? R"({"ready":true})" : R"({"ready":false})", ready ? 200 : 503));
}

void Service::ModelStats(http::Request request, const http::PathParams& params, http::Responder respond) {
  ResponseSender sender(std::move(respond), metrics_, "model_stats", request.received_at);
  if (!CheckApiKey(request, options_.api_key, &sender)) return;
  auto model = models_->Find(params.Get("model"), params.Get("version"));
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  sender.Send(JsonResponse(api::RenderModelStatistics({(*model)->Statistics()})));
}

// ---- KServe v2: inference ---------------------------------------------------------------------------

void Service::Infer(http::Request request, const http::PathParams& params, http::Responder respond) {
  std::optional<ResponseSender> sender = OpenInference(request, std::move(respond), "infer");
  if (!sender.has_value()) return;
  // An unknown model is answered here, without queueing its body.
  auto found = models_->Find(params.Get("model"), params.Get("version"));
  if (!found.ok()) return sender->SendError(found.status());
  Offload(std::move(request), *std::move(sender),
          [this, model = std::string(params.Get("model")), version = std::string(params.Get("version"))](
              http::Request r, ResponseSender s, Keep k) {
            InferWork(std::move(r), model, version, std::move(s), std::move(k));
          });
}

void Service::InferWork(http::Request request, std::string model_name, std::string version, ResponseSender sender,
                        Keep keep) {
  auto model = models_->Find(model_name, version);
  if (!model.ok()) return sender.SendError(model.status());
  sender.set_model((*model)->name(), (*model)->version());
  std::optional<std::string_view> header_length;
  if (std::string_view h = request.header(api::kInferenceHeaderContentLength); !h.empty()) header_length = h;
  // Token tensors hold at most max_documents rows of max_sequence_length tokens.
  api::RequestLimits limits = options_.limits;
  const size_t seq = std::max<size_t>((*model)->max_sequence_length(), 1);
  if (limits.max_documents <= limits.max_batch_tensor_elements / seq) {
    limits.max_batch_tensor_elements = limits.max_documents * seq;
  }
  auto parsed = api::ParseInferRequest(request.body, header_length, limits);
  if (!parsed.ok()) return sender.SendError(parsed.status());
  const ModelSignature& sig = (*model)->signature();
  for (const api::InferRequestedOutput& out : parsed->outputs) {
    if (out.name != sig.logits_name) {
      return sender.SendError(absl::FailedPreconditionError(
          absl::StrCat("unknown output '", EchoForError(out.name), "'; model ", (*model)->name(), " has '", sig.logits_name, "'")));
    }
  }
  auto timeout = IntParameter(parsed->parameters, "timeout");
  if (!timeout.ok()) return sender.SendError(timeout.status());
  auto priority = IntParameter(parsed->parameters, "priority");
  if (!priority.ok()) return sender.SendError(priority.status());
  auto admission = MakeAdmission(request, options_.default_timeout, *timeout, *priority);
  if (!admission.ok()) return sender.SendError(admission.status());

  if (absl::Status s = StillWanted(*admission, "parsing"); !s.ok()) return sender.SendError(s);
  std::vector<tokenizer::Encoding> rows;
  Clock::duration tokenize{};
  if (absl::Status s = serving::RowsFromTensors(**model, *parsed, &rows, &tokenize); !s.ok()) return sender.SendError(s);

  auto req = std::make_shared<api::InferRequest>(*std::move(parsed));
  if (!(*model)->AdmitToModel()) {
    // Breaker open. A classifier with a breaker_default_result answers it for every row, marked
    // degraded; every other model answers 503 (tensors have no lightweight fallback).
    const std::vector<float>& row = (*model)->parameters().breaker_default_result;
    if (row.empty()) return sender.SendError(serving::DegradedUnavailableError((*model)->name()));
    auto response = InferHttpResponse(**model, *req,
                                      serving::DefaultResult(row, static_cast<int64_t>(rows.size())), true);
    if (!response.ok()) return sender.SendError(response.status());
    response->headers.emplace_back("x-tide-degraded", serving::kFallbackDefault);
    metrics_->degraded->WithLabels({(*model)->name(), std::to_string((*model)->version()), serving::kFallbackDefault})->Increment();
    return sender.Send(*std::move(response));
  }
  (*model)->Submit(
      rows, *admission,
      [sender = std::move(sender), keep = std::move(keep), req, m = *model,
       tokenize](absl::StatusOr<serving::InferenceResult> result) mutable {
        if (!result.ok()) return sender.SendError(result.status());
        const Steady::time_point post = Steady::now();
        serving::StageTimings t = result->timings;
        auto response = InferHttpResponse(*m, *req, *std::move(result), /*degraded=*/false);
        if (!response.ok()) return sender.SendError(response.status());
        t.tokenize = tokenize;
        t.postprocess = Steady::now() - post;
        t.total = Steady::now() - sender.received_at();
        AddTimingHeaders(t, &*response);
        sender.Send(*std::move(response), &t);
      });
}

// ---- metrics -------------------------------------------------------------------------------------

void Service::Metrics(http::Request request, http::Responder respond) {
  models_->RefreshMetrics();
  metrics_->inflight_bytes->WithLabels({})->Set(static_cast<double>(budget_->in_flight_bytes()));
  metrics_->tokenization_queue->WithLabels({})->Set(static_cast<double>(pool_->queued()));
  http::Response r;
  r.content_type = metrics::kPrometheusTextContentType;
  r.body = metrics_->registry.RenderText();
  std::move(respond)(std::move(r));
}

}  // namespace tide::server
