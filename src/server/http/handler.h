// tide::http::Handler and Responder — how the server hands a request over and how the answer comes
// back: Handler::Handle(request, responder), and the responder called once, whenever and from
// whichever thread.
//
// Contract:
//  - Handler::Handle runs on an I/O thread and must not block for long (hand work to a queue).
//    It must not throw; if it does, its Responder (destroyed uncalled) answers 500.
//  - A Responder is move-only and must be called once, from any thread. Until then the server
//    keeps the connection open. Calling it after the client left or after Stop() is safe: the
//    response is dropped. A Responder destroyed (or assigned over) without being called answers
//    500 {"error":"internal: request dropped"} (ServerErrorResponse, error_response.h).
//  - Responder::FromCallback hands the response to a function instead (tests, in-process callers).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "server/http/http_message.h"

namespace tide::http {

namespace internal {
// Where a Responder delivers its response. Implemented by the server's connections and by
// Responder::FromCallback.
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  virtual void Complete(uint64_t request_id, Response response) = 0;
};
}  // namespace internal

// Move-only, call-once completion of one request. Safe to call from any thread.
class Responder {
 public:
  Responder() = default;
  Responder(std::shared_ptr<internal::ResponseSink> sink, uint64_t request_id)
      : sink_(std::move(sink)), request_id_(request_id) {}
  Responder(Responder&& other) noexcept = default;
  Responder& operator=(Responder&& other) noexcept;
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;
  ~Responder();

  // Delivers the response. Calling an empty (moved-from or already used) Responder does nothing.
  void operator()(Response response) &&;
  explicit operator bool() const { return sink_ != nullptr; }

  // A Responder that hands the response to `callback` (for tests and in-process callers). If it is
  // destroyed uncalled, `callback` receives the 500 "request dropped" response.
  static Responder FromCallback(absl::AnyInvocable<void(Response)> callback);

 private:
  std::shared_ptr<internal::ResponseSink> sink_;
  uint64_t request_id_ = 0;
};

class Handler {
 public:
  virtual ~Handler() = default;
  virtual void Handle(Request request, Responder respond) = 0;
};

}  // namespace tide::http
