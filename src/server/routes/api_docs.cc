#include "server/routes/api_docs.h"

#include "api/openapi.h"
#include "common/version.h"

namespace tide::server {
namespace internal {
extern const std::string_view kDocsHtml;  // docs_page.cc, generated from docs.html
}  // namespace internal

std::string_view DocsPage() { return internal::kDocsHtml; }

http::Response DocsResponse() {
  http::Response r;
  r.content_type = "text/html; charset=utf-8";
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.body = std::string(DocsPage());
  return r;
}

http::Response OpenApiResponse() {
  http::Response r;
  r.body = api::OpenApiDocument(Version());
  return r;
}

}  // namespace tide::server
