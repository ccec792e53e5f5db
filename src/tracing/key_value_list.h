// tide::tracing ParseKeyValueList: the "key1=value1,key2=value2" format of OTEL_RESOURCE_ATTRIBUTES
// and OTEL_EXPORTER_OTLP_HEADERS (the OpenTelemetry specification's, after W3C Baggage).
//
// Contract: members split at ',', key and value at the first '=', spaces and tabs around both
// trimmed, values percent-decoded (%XX); empty members skipped; a key given twice keeps the last
// value, in the place of the first. A member without '=', with an empty key, or with a bad percent
// escape makes the whole list an error (kInvalidArgument starting with `what` and naming the
// member): the spec says to discard such a value, and tide refuses it at start instead.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tide::tracing {

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseKeyValueList(std::string_view text,
                                                                                  std::string_view what);

}  // namespace tide::tracing
