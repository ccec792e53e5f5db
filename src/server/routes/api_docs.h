// GET /api-doc/openapi.json and GET /docs: the OpenAPI description of every route (api/openapi.h)
// and a page that renders it (docs.html, embedded in the binary at build time).
//
// Contract:
//  - DocsResponse(): 200 text/html, the page: self-contained (inline CSS and JavaScript, no CDN,
//    works offline); it fetches the relative URL api-doc/openapi.json and lists every route with
//    its example request and a button that sends it.
//  - OpenApiResponse(): 200 application/json, api::OpenApiDocument(Version()).
//  - Both are open without the API key (they carry no data) and pure: any thread.
#pragma once

#include <string_view>

#include "server/http/http_server.h"

namespace tide::server {

std::string_view DocsPage();
http::Response DocsResponse();
http::Response OpenApiResponse();

}  // namespace tide::server
