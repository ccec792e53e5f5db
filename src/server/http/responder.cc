#include "server/http/handler.h"

#include <memory>
#include <utility>

#include "server/http/error_response.h"

namespace tide::http {
namespace {

class CallbackSink final : public internal::ResponseSink {
 public:
  explicit CallbackSink(absl::AnyInvocable<void(Response)> callback) : callback_(std::move(callback)) {}
  void Complete(uint64_t, Response response) override { callback_(std::move(response)); }

 private:
  absl::AnyInvocable<void(Response)> callback_;
};

Response DroppedResponse() { return ServerErrorResponse(ErrorKind::kInternal, "internal: request dropped"); }

}  // namespace

Responder& Responder::operator=(Responder&& other) noexcept {
  if (this != &other) {
    if (sink_) std::move(*this)(DroppedResponse());
    sink_ = std::move(other.sink_);
    request_id_ = other.request_id_;
  }
  return *this;
}

Responder::~Responder() {
  if (sink_) std::move(*this)(DroppedResponse());
}

void Responder::operator()(Response response) && {
  std::shared_ptr<internal::ResponseSink> sink = std::move(sink_);
  if (sink) sink->Complete(request_id_, std::move(response));
}

Responder Responder::FromCallback(absl::AnyInvocable<void(Response)> callback) {
  return Responder(std::make_shared<CallbackSink>(std::move(callback)), 0);
}

}  // namespace tide::http
