// tide::api KServe v2 inference wire format — `POST /v2/models/{m}[/versions/{v}]/infer`, JSON
// and the binary tensor data extension (Triton's "binary_tensor_data").
//
// Request JSON: {"id"?: str, "parameters"?: {...},
//                "inputs": [{"name", "shape": [int...], "datatype", "parameters"?: {...},
//                            "data"?: flat or nested row-major array}],
//                "outputs"?: [{"name", "parameters"?: {"binary_data"?: bool}}]}
// Binary extension: when the Inference-Header-Content-Length header is N, the first N body bytes
// are the JSON and the rest is the concatenated raw data of every input whose parameters carry
// "binary_data_size" (in input order; little-endian; BOOL one byte 0/1; BYTES elements each a
// 4-byte little-endian length then the bytes). Such an input has no "data".
//
// Response: {"model_name", "model_version", "id", "parameters"?,
//            "outputs": [{"name", "datatype", "shape", "data"}]}
// or, for outputs returned as binary (request parameter "binary_data_output": true, or an output's
// "binary_data": true, which wins), the output carries "parameters": {"binary_data_size": n}
// instead of "data", its bytes follow the JSON, and the HTTP response needs the header
// Inference-Header-Content-Length: <JSON bytes> and Content-Type application/octet-stream.
//
// Contract:
//  - Pure functions, thread-safe, never throw.
//  - ParseInferRequest errors: JSON syntax, a header value that is not a byte count within the
//    body -> kInvalidArgument (400). Everything well-formed but wrong -> kFailedPrecondition (422)
//    with the field path in the message: missing name/shape/datatype/data, unknown or unsupported
//    datatype, negative dims, a batch dimension (shape[0]) over max_documents, a BYTES tensor with
//    more than max_documents elements, an element count over max_batch_tensor_elements (no
//    overflow is possible; all three on the shape, before `data` is converted), more JSON strings
//    or arrays than MaxJsonStrings(limits) (before the JSON is parsed), data count != shape product, an element of the wrong type or out of range,
//    binary_data_size without the header or disagreeing with the shape, binary sections that do
//    not add up to the bytes after the JSON, invalid UTF-8 in a binary BYTES element, a BYTES
//    element over max_text_chars, duplicate input names.
//  - Nested `data` arrays are flattened row-major; only the element count is checked against the
//    shape (as Triton does). Nothing is reserved before the count is checked against the body.
//  - Unknown fields are ignored; null means "not given". Which inputs a model needs (names,
//    datatypes, shapes) is checked by the serving layer against the model's metadata.
//  - RenderInferResponse: kInternal when an output's data does not match its datatype or shape.
//    Non-finite floats render as JSON null in the JSON form (exact in the binary form).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/kserve_tensor.h"
#include "api/request_limits.h"

namespace tide::api {

// The header that carries the JSON length in the binary tensor extension.
inline constexpr std::string_view kInferenceHeaderContentLength =
    "Inference-Header-Content-Length";

struct InferRequestedOutput {
  std::string name;
  std::optional<bool> binary_data;  // the output's "binary_data" parameter, when given
  Parameters parameters;            // as sent
};

struct InferRequest {
  std::string id;                             // "" when not given
  Parameters parameters;                      // as sent
  std::vector<Tensor> inputs;                 // never empty after a successful parse
  std::vector<InferRequestedOutput> outputs;  // empty: return every output
  bool binary_data_output = false;            // request parameter "binary_data_output"
};

// `inference_header_content_length`: the raw value of the Inference-Header-Content-Length header,
// or nullopt when the request has none (then the whole body is JSON).
absl::StatusOr<InferRequest> ParseInferRequest(
    std::string_view body, std::optional<std::string_view> inference_header_content_length,
    const RequestLimits& limits = {});

// The checks every edge applies to an input tensor's shape before its data is converted (the
// gRPC edge builds its Tensors from protobuf and shares them): a batch dimension over
// max_documents, an element count over max_batch_tensor_elements or a negative dim, a BYTES tensor
// with more than max_documents elements -> kFailedPrecondition naming `shape_path`. Returns the
// element count.
absl::StatusOr<size_t> CheckTensorShape(const Tensor& tensor, std::string_view shape_path,
                                        const RequestLimits& limits);

// Decodes one tensor's raw bytes (the binary extension's section; gRPC's raw_input_contents
// entry) holding `count` elements of tensor->datatype into tensor->data: little-endian, BOOL one
// byte 0/1, BYTES elements each a 4-byte little-endian length then valid UTF-8 of at most
// max_text_chars bytes. kFailedPrecondition naming `path` when the bytes do not hold exactly
// `count` elements.
absl::Status DecodeBinaryTensor(std::string_view bytes, size_t count, const std::string& path,
                                const RequestLimits& limits, Tensor* tensor);

// The inverse: appends `data` in that layout (an output's binary section; gRPC's
// raw_output_contents entry).
void EncodeBinaryTensor(const TensorData& data, std::string* out);

// Whether the output `name` goes back as binary data under the rules above.
bool OutputWantsBinary(const InferRequest& request, std::string_view name);

struct InferResponse {
  std::string model_name;
  std::string model_version;
  std::string id;          // echo of the request id; "" (none): no "id" field, as Triton
  Parameters parameters;   // rendered only when not empty
  std::vector<Tensor> outputs;
};

struct RenderedInferResponse {
  std::string body;
  // Set iff some output is binary: send it as the Inference-Header-Content-Length header (the
  // JSON prefix length) with Content-Type application/octet-stream; else send application/json.
  std::optional<size_t> inference_header_content_length;
};

absl::StatusOr<RenderedInferResponse> RenderInferResponse(const InferResponse& response,
                                                          const InferRequest& request);

}  // namespace tide::api
