#include "api/admin_input.h"

#include "absl/strings/str_cat.h"
#include "api/json_reader.h"
#include "api/request_limits.h"
#include "common/error.h"

namespace tide::api {
namespace {

absl::Status CheckAdminJson(std::string_view text, std::string_view what, ErrorKind too_large) {
  const AdminInputLimits& limits = kAdminInputLimits;
  if (text.size() > limits.max_bytes) {
    return MakeError(too_large, absl::StrCat(Sv(what), " has ", text.size(), " bytes; the limit for admin input is ",
                                             limits.max_bytes));
  }
  RequestLimits scan;
  scan.max_json_depth = limits.max_json_depth;
  scan.max_json_strings = limits.max_json_strings;
  if (absl::Status s = CheckJsonCost(text, scan); !s.ok()) {
    return errors::InvalidInput(absl::StrCat(Sv(what), ": ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckAdminBody(std::string_view body, std::string_view what) {
  return CheckAdminJson(body, what, ErrorKind::kPayloadTooLarge);
}

absl::Status CheckAdminJsonText(std::string_view text, std::string_view what) {
  return CheckAdminJson(text, what, ErrorKind::kInvalidInput);
}

}  // namespace tide::api
