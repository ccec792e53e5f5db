// libFuzzer target for the gRPC edge's protobuf-to-request conversions (src/server/grpc
// kserve_proto.h, tei_proto.h): the first input byte selects the message type, the rest is its
// protobuf encoding, exactly what a client puts on the wire. Messages that parse are converted;
// converted requests are checked against the limits and answered through the response
// converters. Checks: no crash, no sanitizer report, every error a FAILED_PRECONDITION-kind
// status with an HTTP status and gRPC code from the one table, every accepted tensor holding as
// many elements as its shape, raw outputs decoding back to the same floats.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api/status_http.h"
#include "common/error.h"
#include "google/protobuf/stubs/logging.h"
#include "server/grpc/kserve_proto.h"
#include "server/grpc/tei_proto.h"

namespace {

using namespace tide;

void Check(bool condition) {
  if (!condition) std::abort();
}

void CheckError(const absl::Status& status) {
  Check(!status.ok());
  Check(FindKind(status).has_value());  // every decoding error carries its kind to the edge
  const int http = api::HttpStatusFor(status);
  Check(http >= 400 && http < 600);
  const int grpc = api::GrpcStatusFor(status);
  Check(grpc > 0 && grpc <= 16);
}

api::RequestLimits SmallLimits() {
  api::RequestLimits limits;
  limits.max_documents = 64;
  limits.max_text_chars = 4096;
  limits.max_batch_tensor_elements = 64 * 128;
  return limits;
}

void FuzzInfer(const uint8_t* data, size_t size) {
  inference::ModelInferRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return;
  const api::RequestLimits limits = SmallLimits();
  auto request = grpc_edge::InferRequestFromProto(proto, limits);
  if (!request.ok()) return CheckError(request.status());
  Check(!request->inputs.empty());
  size_t bytes_elements = 0;
  for (const api::Tensor& t : request->inputs) {
    auto count = api::ElementCount(t.shape, limits.max_batch_tensor_elements, "shape");
    Check(count.ok());
    Check(api::DataMatchesType(t.data, t.datatype));
    Check(api::TensorDataSize(t.data) == *count);
    if (t.datatype == api::DataType::kBytes) bytes_elements += *count;
  }
  (void)bytes_elements;
  // Answer with one FP32 output per accepted request; raw outputs decode to the same floats.
  api::InferResponse response;
  response.model_name = "m";
  response.model_version = "1";
  response.id = request->id;
  api::Tensor out;
  out.name = "logits";
  out.datatype = api::DataType::kFp32;
  out.shape = {2, 1};
  const std::vector<float> logits = {0.25f, -3.5f};
  out.data = logits;
  response.outputs.push_back(out);
  inference::ModelInferResponse proto_out;
  Check(grpc_edge::InferResponseToProto(response, *request, &proto_out).ok());
  Check(proto_out.outputs_size() == 1);
  if (proto_out.raw_output_contents_size() == 1 && !proto_out.raw_output_contents(0).empty()) {
    Check(proto_out.raw_output_contents(0).size() == 8);
    float f[2];
    std::memcpy(f, proto_out.raw_output_contents(0).data(), 8);
    Check(f[0] == logits[0] && f[1] == logits[1]);
  } else {
    Check(proto_out.outputs(0).contents().fp32_contents_size() == 2);
  }
}

void FuzzRerank(const uint8_t* data, size_t size) {
  tei::v1::RerankRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return;
  const api::RequestLimits limits = SmallLimits();
  auto request = grpc_edge::RerankRequestFromProto(proto, limits);
  if (!request.ok()) return CheckError(request.status());
  Check(!request->query.empty() && !request->texts.empty() && request->texts.size() <= limits.max_documents);
  std::vector<float> scores(request->texts.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<float>((i * 7919) % 13) - 6.0f;
  tei::v1::RerankResponse out;
  Check(grpc_edge::RerankResponseToProto(*request, scores, {}, &out).ok());
  Check(static_cast<size_t>(out.ranks_size()) == scores.size());
  for (int i = 1; i < out.ranks_size(); ++i) Check(out.ranks(i - 1).score() >= out.ranks(i).score());

  // The same texts as a RerankStream, one message each.
  grpc_edge::RerankStreamCollector collector(limits);
  absl::Status s;
  for (const std::string& text : request->texts) {
    tei::v1::RerankStreamRequest m;
    m.set_query(request->query);
    m.set_text(text);
    s = collector.Add(m);
    if (!s.ok()) return CheckError(s);
  }
  auto streamed = collector.Finish();
  Check(streamed.ok() && streamed->texts == request->texts);
}

void FuzzTokenize(const uint8_t* data, size_t size) {
  tei::v1::EncodeRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return;
  auto request = grpc_edge::TokenizeRequestFromProto(proto, SmallLimits());
  if (!request.ok()) return CheckError(request.status());
  Check(request->inputs.size() == 1);
}

}  // namespace

// Protobuf logs every string field with invalid UTF-8 it refuses; the fuzzer makes many.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0] % 3;
  ++data;
  --size;
  switch (selector) {
    case 0: FuzzInfer(data, size); break;
    case 1: FuzzRerank(data, size); break;
    default: FuzzTokenize(data, size); break;
  }
  return 0;
}
