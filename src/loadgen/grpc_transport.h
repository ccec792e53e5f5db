// tide::loadgen gRPC client side: a Transport that sends rerank workloads as gRPC calls, for
// `tide bench --protocol grpc`.
//
// Endpoints:
//   kRerank  tei.v1.Rerank/Rerank: query, texts, truncate=true (HTTP /rerank's default; proto3
//            cannot leave it unset)
//   kKServe  inference.GRPCInferenceService/ModelInfer: BYTES inputs "text" (the query, once per
//            document) and "text_pair" (the documents) in raw_input_contents (4-byte little-endian
//            length + bytes per element), as tritonclient.grpc sends them
// Contract:
//  - Create builds every request message once (request i sends messages[i % n]) and one channel
//    (one HTTP/2 connection) to host:port; kInvalidArgument for no workloads, max_in_flight 0, an
//    endpoint gRPC does not serve (v1-rerank, template) or kserve without a model.
//  - Send (loop thread only): at most max_in_flight calls are outstanding; more wait in a FIFO and
//    go out as calls finish (the driver measures that wait, as with HTTP connections). Each call
//    has the deadline timeout_ms after it goes out. done runs on the loop thread exactly once with
//    grpc_status set (0 = OK; "grpc <CODE NAME>" in error otherwise; no HTTP status).
//  - gRPC finishes calls on its own threads; the transport posts each outcome to the loop's
//    io_context and holds the loop open while calls are out (an io_context with nothing but a gRPC
//    call pending would return from Run).
//  - stage_totals(): sums, over the OK answers seen so far, of the server-timing trailer's stages
//    (tokenize, queue, inference, postprocess; a degraded answer has none), in the shape of a
//    /metrics scrape so DiffStageTotals reports the mean per answer.
//  - The destructor (on the loop thread, after Run returned; before the loop) cancels calls still
//    out and waits until gRPC has finished them; their done callbacks never run.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "loadgen/event_loop.h"
#include "loadgen/http_transport.h"
#include "loadgen/request_builder.h"
#include "loadgen/server_metrics.h"
#include "loadgen/workload.h"

namespace google::protobuf {
class Message;
}

namespace tide::loadgen {

struct GrpcTransportOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8001;
  Endpoint endpoint = Endpoint::kRerank;  // kRerank (tei.v1) or kKServe (ModelInfer)
  std::string model;                      // ModelInfer's model_name (required for kKServe)
  std::vector<RerankWorkload> workloads;  // request i sends workloads[i % size]
  size_t max_in_flight = 1;
  int64_t timeout_ms = 30000;
  // TLS (tide bench's grpcs:// URLs): the server is verified against tls_root_pem (PEM text; "":
  // gRPC's default roots); tls_cert_pem / tls_key_pem: a client certificate (mutual TLS).
  bool tls = false;
  std::string tls_root_pem;
  std::string tls_cert_pem;
  std::string tls_key_pem;
};

// The RPC a bench endpoint calls, e.g. "tei.v1.Rerank/Rerank"; "" for one gRPC does not serve.
std::string_view GrpcMethodFor(Endpoint endpoint);

// The request messages, exposed for tests.
std::unique_ptr<google::protobuf::Message> BuildTeiRerankRequest(const RerankWorkload& workload);
std::unique_ptr<google::protobuf::Message> BuildModelInferRequest(const std::string& model,
                                                                  const RerankWorkload& workload);

// Adds the stages of one server-timing value ("tokenize;dur=0.512, queue;dur=1.000, ...", in ms;
// "total" skipped) to `totals` (seconds, one observation per stage). Malformed entries are skipped.
void AddServerTiming(std::string_view server_timing, StageTotals* totals);

// "OK", "UNAVAILABLE", ... for a gRPC status code; "CODE <n>" for an unknown one.
std::string GrpcCodeName(int code);

class GrpcTransport final : public Transport {
 public:
  static absl::StatusOr<std::unique_ptr<GrpcTransport>> Create(AsioEventLoop* loop,
                                                               const GrpcTransportOptions& options);
  ~GrpcTransport() override;
  void Send(size_t request_index, std::function<void(const TransportResult&)> done) override;
  const StageTotals& stage_totals() const { return stage_totals_; }

  struct Impl;  // gRPC types, in grpc_transport.cc
  struct Call;  // one call in flight, in grpc_transport.cc

 private:
  struct Pending {
    size_t index;
    std::function<void(const TransportResult&)> done;
  };
  GrpcTransport(AsioEventLoop* loop, GrpcTransportOptions options);
  void Start(Pending request);
  void OnDone(Call* call);  // loop thread: the call's outcome arrived

  AsioEventLoop* loop_;
  GrpcTransportOptions options_;
  std::unique_ptr<Impl> impl_;
  size_t in_flight_ = 0;
  std::deque<Pending> waiting_;
  StageTotals stage_totals_;
};

}  // namespace tide::loadgen
