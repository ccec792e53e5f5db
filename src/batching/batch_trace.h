// tide::batching batch tracing hooks — what a batch runner tells a tracer about one executed batch,
// without the batcher knowing anything of tracing: the W3C ids of the requests whose rows rode in
// it (TraceLink, carried by each task) and the batch's facts; the hook answers with the batch's own
// span, which each request's answer then names (serving::StageTimings::batches).
//
// Contract:
//  - TraceLink is a plain value: a trace id, a span id and the W3C trace flags (bit 0: sampled).
//  - BatchTraceFacts::requests holds each distinct sampled request of the batch once, in row
//    order; a hook is called only when there is at least one (an unsampled request costs nothing).
//  - A BatchTraceHook runs on the instance thread right after the batch ran, before its rows
//    complete; it must be thread-safe (instances run concurrently) and must not block.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "common/clock.h"

namespace tide::batching {

struct TraceLink {
  std::array<uint8_t, 16> trace_id{};
  std::array<uint8_t, 8> span_id{};
  uint8_t flags = 0;
  bool sampled() const { return (flags & 1) != 0; }
  friend bool operator==(const TraceLink&, const TraceLink&) = default;
};

struct BatchTraceFacts {
  std::string_view model;
  int64_t version = 0;
  std::string_view precision;         // "int8", "fp16", "fp32" ("" or "unknown": not known)
  int instance = 0;
  size_t rows = 0;                    // real rows (tasks)
  size_t padded_rows = 0;             // the batch-size bucket
  size_t padded_sequence_length = 0;  // the sequence bucket
  size_t real_tokens = 0;
  size_t padded_tokens = 0;
  bool alone = false;                 // formed alone (may use the idle instances' cores)
  Clock::duration inference{};        // how long the run took; it ended now
  std::vector<TraceLink> requests;    // distinct sampled requests, in row order
};

// Returns the batch span's link (nullopt: none recorded).
using BatchTraceHook = std::function<std::optional<TraceLink>(const BatchTraceFacts&)>;

}  // namespace tide::batching
