#include "api/openapi.h"

namespace tide::api {
namespace internal {
extern const std::string_view kOpenApiJson;  // openapi_document.cc, generated from openapi.json
}  // namespace internal

std::string OpenApiDocument(std::string_view version) {
  constexpr std::string_view kPlaceholder = "{tide_version}";
  std::string out(internal::kOpenApiJson);
  if (const size_t at = out.find(kPlaceholder); at != std::string::npos) out.replace(at, kPlaceholder.size(), version);
  return out;
}

}  // namespace tide::api
