#include "server/grpc/health_service.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "common/error_echo.h"
#include "server/grpc/grpc_call.h"

namespace tide::grpc_edge {

using grpc::health::v1::HealthCheckResponse;

HealthStatus HealthStatusFor(std::string_view service, bool ready) {
  if (service == "liveness") return HealthCheckResponse::SERVING;
  bool known = service.empty() || service == "readiness";
  for (std::string_view s : kServedServices) known = known || service == s;
  if (!known) return HealthCheckResponse::SERVICE_UNKNOWN;
  return ready ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

// One Watch stream. Offer() (poller or Watch) and End() (Shutdown) decide under mu_ and call
// StartWrite / Finish outside it, so that a reaction gRPC runs inline (on the calling thread, at
// the end of the call) cannot deadlock; at most one write is in flight, and Finish is called
// exactly once, never while a write is. Reference-counted: gRPC holds one reference until OnDone,
// and whoever offers a status holds one meanwhile, so the service never calls into a reactor with
// its own lock held.
class HealthService::WatchReactor final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  WatchReactor(HealthService* service, std::string name) : service_(service), name_(std::move(name)) {}
  const std::string& name() const { return name_; }
  void Ref() { refs_.fetch_add(1); }
  void Unref() {
    if (refs_.fetch_sub(1) == 1) delete this;
  }

  void Offer(HealthStatus status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      latest_ = status;
      if (finished_ || writing_ || (sent_any_ && sent_ == status)) return;
      StartWriteLocked();
    }
    StartWrite(&out_);
  }

  // Ends the stream with `status` once the write in flight (if any) is done.
  void End(const grpc::Status& status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_ || ending_) return;
      ending_ = true;
      end_status_ = status;
      if (writing_) return;  // OnWriteDone finishes
      finished_ = true;
    }
    Finish(status);
  }

  void OnWriteDone(bool ok) override {
    enum { kNothing, kWrite, kFinish } next = kNothing;
    grpc::Status finish_status;
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (finished_) return;
      if (!ok) {  // the call is gone (cancelled, or the client left)
        finished_ = true;
        finish_status = grpc::Status(grpc::StatusCode::CANCELLED, "the health watch was cancelled");
        next = kFinish;
      } else if (sent_ != latest_) {
        StartWriteLocked();
        next = kWrite;
      } else if (ending_) {
        finished_ = true;
        finish_status = end_status_;
        next = kFinish;
      }
    }
    if (next == kWrite) StartWrite(&out_);
    if (next == kFinish) Finish(finish_status);
  }

  void OnCancel() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_ || writing_) return;  // a write in flight fails and finishes
      finished_ = true;
    }
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the health watch was cancelled"));
  }

  void OnDone() override {
    service_->Remove(this);
    Unref();
  }

 private:
  void StartWriteLocked() {
    writing_ = true;
    sent_any_ = true;
    sent_ = latest_;
    out_.set_status(latest_);
  }

  HealthService* const service_;
  const std::string name_;
  std::atomic<int> refs_{1};  // gRPC's, until OnDone
  std::mutex mu_;
  HealthCheckResponse out_;  // written only while !writing_ (under mu_)
  HealthStatus latest_ = HealthCheckResponse::UNKNOWN;
  HealthStatus sent_ = HealthCheckResponse::UNKNOWN;
  bool sent_any_ = false;
  bool writing_ = false;
  bool ending_ = false;
  bool finished_ = false;
  grpc::Status end_status_;
};

HealthService::~HealthService() { Shutdown(); }

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* context,
                                               const grpc::health::v1::HealthCheckRequest* request,
                                               grpc::health::v1::HealthCheckResponse* response) {
  auto* reactor = new UnaryReactor();
  UnaryAnswer answer(context, reactor, recorder_, "health_check", Steady::now());
  const HealthStatus status = HealthStatusFor(request->service(), core_->Ready());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    answer.FinishError(errors::NotFound(absl::StrCat("unknown service '", EchoForError(request->service()), "'")));
    return reactor;
  }
  response->set_status(status);
  answer.Finish();
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext*, const grpc::health::v1::HealthCheckRequest* request) {
  auto* watch = new WatchReactor(this, request->service());
  watch->Ref();
  bool shut_down = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down = shut_down_;
    watches_.insert(watch);
    if (!shut_down && !poller_.joinable()) poller_ = std::thread([this] { Poll(); });
  }
  wake_.notify_all();
  watch->Offer(HealthStatusFor(watch->name(), !shut_down && core_->Ready()));
  if (shut_down) watch->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
  watch->Unref();
  return watch;
}

void HealthService::Poll() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!shut_down_) {
    if (watches_.empty()) {
      wake_.wait(lock, [this] { return shut_down_ || !watches_.empty(); });
      continue;
    }
    wake_.wait_for(lock, watch_poll_, [this] { return shut_down_; });
    if (shut_down_) break;
    const std::vector<WatchReactor*> watches = Referenced();
    lock.unlock();
    const bool ready = core_->Ready();
    for (WatchReactor* watch : watches) {
      watch->Offer(HealthStatusFor(watch->name(), ready));
      watch->Unref();
    }
    lock.lock();
  }
}

std::vector<HealthService::WatchReactor*> HealthService::Referenced() {
  std::vector<WatchReactor*> out(watches_.begin(), watches_.end());
  for (WatchReactor* watch : out) watch->Ref();
  return out;
}

void HealthService::Remove(WatchReactor* watch) {
  std::lock_guard<std::mutex> lock(mu_);
  watches_.erase(watch);
}

void HealthService::Shutdown() {
  std::thread poller;
  std::vector<WatchReactor*> watches;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!shut_down_) {
      shut_down_ = true;
      watches = Referenced();
    }
    poller = std::move(poller_);
  }
  wake_.notify_all();
  if (poller.joinable()) poller.join();
  for (WatchReactor* watch : watches) {
    watch->Offer(HealthStatusFor(watch->name(), false));
    watch->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
    watch->Unref();
  }
}

}  // namespace tide::grpc_edge
