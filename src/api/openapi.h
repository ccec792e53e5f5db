// tide::api OpenAPI — the OpenAPI 3 description of every HTTP route of tide (openapi.json, embedded
// at build time), served at `GET /api-doc/openapi.json` (TEI's path) and rendered by `GET /docs`.
//
// Contract:
//  - OpenApiDocument(version): the document with info.version set to `version`; pure, thread-safe.
//  - Every route of server::RouteTable() has a path and method here (with the route table's
//    `{model}` / `{version}` syntax, which is OpenAPI's); every request body has an `example`
//    that succeeds against a server serving a model named by the `model` parameter's example
//    (tests/blackbox/tide_serve_compat_test.cc sends each one). Edit openapi.json with a route.
#pragma once

#include <string>
#include <string_view>

namespace tide::api {

std::string OpenApiDocument(std::string_view version);

}  // namespace tide::api
