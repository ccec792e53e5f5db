// tide::serving KServe answers — what the KServe v2 protocol says about a served model (its
// metadata) and how a model's result becomes the protocol's inference response, as api:: values
// that each edge renders in its own wire format (JSON / binary tensors on HTTP, protobuf on gRPC).
// One function each, so both edges answer alike.
//
// Contract: pure functions of immutable model parts; thread-safe; never fail.
//  - ModelMetadataOf: name, every loaded version, platform "onnxruntime_onnx", the config's inputs
//    and outputs (a batched model's shapes start with -1), plus the BYTES inputs "text" and
//    "text_pair" [-1] that the text path accepts.
//  - InferResponseOf: model name and version, the request's id, the logits as the model's output
//    tensor FP32 [rows, num_labels]; `degraded` (a fallback's result) adds the response parameter
//    "degraded": true.
#pragma once

#include <vector>

#include "api/kserve_infer.h"
#include "api/kserve_metadata.h"
#include "serving/inference_request.h"
#include "serving/model_manager.h"
#include "serving/served_model.h"

namespace tide::serving {

api::ModelMetadata ModelMetadataOf(const ModelManager& models, const ServedModel& model);

api::InferResponse InferResponseOf(const ServedModel& model, const api::InferRequest& request,
                                   InferenceResult result, bool degraded);

}  // namespace tide::serving
