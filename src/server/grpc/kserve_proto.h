// tide::grpc_edge KServe v2 protobuf conversions — a gRPC ModelInferRequest as the same
// api::InferRequest the HTTP edge parses from JSON or binary tensors (so serving::RowsFromTensors
// validates both alike), and an api::InferResponse as a ModelInferResponse.
//
// Contract:
//  - Pure functions, thread-safe, never throw; safe on any message a client can send (the fuzz
//    target fuzz/grpc_fuzz.cc feeds them arbitrary bytes).
//  - InferRequestFromProto errors are kFailedPrecondition (422 / INVALID_ARGUMENT) naming the field,
//    with the HTTP edge's rules and words: no inputs, an empty or duplicate input name, an unknown
//    or unsupported datatype, more than 16 dims, the shape limits of api::CheckTensorShape (checked
//    before any element is copied), a typed `contents` field other than the datatype's, an element
//    count that differs from the shape's, a BYTES element over max_text_chars or not valid UTF-8,
//    raw_input_contents with an entry count other than the inputs' or beside typed contents, raw
//    bytes that do not hold the shape (api::DecodeBinaryTensor), a parameter without a value or an
//    unsigned one over INT64_MAX, a non-boolean binary_data_output / binary_data.
//  - Outputs travel as raw_output_contents when the request sent raw_input_contents (what Triton's
//    clients send and read), as typed contents otherwise; the request parameter
//    "binary_data_output" or an output's "binary_data" (booleans) choose explicitly.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/kserve_infer.h"
#include "api/kserve_tensor.h"
#include "api/request_limits.h"
#include "grpc_service.pb.h"

namespace tide::grpc_edge {

using ProtoParameters = google::protobuf::Map<std::string, inference::InferParameter>;

absl::StatusOr<api::Parameters> ParametersFromProto(const ProtoParameters& parameters, std::string_view path);
void ParametersToProto(const api::Parameters& parameters, ProtoParameters* out);

absl::StatusOr<api::InferRequest> InferRequestFromProto(const inference::ModelInferRequest& request,
                                                        const api::RequestLimits& limits);

// Fills `out` from `response`; each output goes raw or typed by api::OutputWantsBinary(request, name).
// kInternal when an output's data does not match its datatype.
absl::Status InferResponseToProto(const api::InferResponse& response, const api::InferRequest& request,
                                  inference::ModelInferResponse* out);

}  // namespace tide::grpc_edge
