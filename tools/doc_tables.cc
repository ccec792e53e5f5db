// doc_tables: prints the tables the code defines, one row per line, tab-separated, for
// tools/check_docs.py (CTest docs_check) to compare with the tables in docs/:
//   route      METHOD  PATTERN  ACCESS  LISTENERS       server::RouteTable()
//   rpc        METHOD  ACCESS                           server::RpcTable()
//   error      KIND    HTTP     ERROR_TYPE  GRPC_CODE   kErrorKinds (common/error.h)
//   parameter  KEY                                      config::TideParameters::Keys()
// ACCESS is guard::AccessName ("none", "monitor", "tenant", "admin"); LISTENERS is "main" or
// "main+admin" (also served on --admin-port); GRPC_CODE is the google.rpc.Code name.
// The flags of `tide serve` are read from `tide serve --help` by the checker itself.
#include <array>
#include <cstdio>
#include <string>
#include <string_view>

#include "common/error.h"
#include "config/tide_parameters.h"
#include "guard/access.h"
#include "server/access/access_table.h"

namespace {

std::string_view GrpcCodeName(int code) {
  static constexpr std::array<std::string_view, 17> kNames = {
      "OK",           "CANCELLED",         "UNKNOWN",           "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
      "NOT_FOUND",    "ALREADY_EXISTS",    "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",      "OUT_OF_RANGE",      "UNIMPLEMENTED",     "INTERNAL",         "UNAVAILABLE",
      "DATA_LOSS",    "UNAUTHENTICATED"};
  return code >= 0 && code < static_cast<int>(kNames.size()) ? kNames[code] : "UNKNOWN_CODE";
}

void Row(std::initializer_list<std::string_view> cells) {
  std::string line;
  for (std::string_view c : cells) {
    if (!line.empty()) line += '\t';
    line.append(c);
  }
  std::puts(line.c_str());
}

}  // namespace

int main() {
  for (const tide::server::RouteEntry& r : tide::server::RouteTable()) {
    Row({"route", r.method, r.pattern, tide::guard::AccessName(r.access), r.admin ? "main+admin" : "main"});
  }
  for (const tide::server::RpcEntry& r : tide::server::RpcTable()) {
    Row({"rpc", r.method, tide::guard::AccessName(r.access)});
  }
  for (const tide::ErrorKindInfo& e : tide::kErrorKinds) {
    const std::string http = std::to_string(e.http_status);
    Row({"error", e.name, http, e.error_type, GrpcCodeName(e.grpc_code)});
  }
  for (std::string_view key : tide::config::TideParameters::Keys()) Row({"parameter", key});
  return 0;
}
