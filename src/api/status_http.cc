#include "api/status_http.h"

namespace tide::api {

int HttpStatusFor(ErrorKind kind) { return Info(kind).http_status; }
int HttpStatusFor(const absl::Status& status) { return HttpStatusFor(KindOf(status)); }

int GrpcStatusFor(ErrorKind kind) { return Info(kind).grpc_code; }
int GrpcStatusFor(const absl::Status& status) { return GrpcStatusFor(KindOf(status)); }

std::string_view ErrorTypeFor(ErrorKind kind) { return Info(kind).error_type; }
std::string_view ErrorTypeFor(const absl::Status& status) { return ErrorTypeFor(KindOf(status)); }

}  // namespace tide::api
