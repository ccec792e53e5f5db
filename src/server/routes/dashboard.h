// GET /dashboard: the live dashboard page (dashboard.html, embedded in the binary at build time).
//
// Contract:
//  - DashboardPage() is the whole HTML document: self-contained (inline CSS and JavaScript, no
//    CDN, no web fonts, no external request), it only polls the relative URL `metrics` and draws
//    per model and version the rates, latency quantiles, queue depth, batch and padding
//    histograms, instance busy ratio, breaker, rollout and cache state computed in the browser.
//  - DashboardResponse() is that page as a 200 text/html response, with Cache-Control: no-cache.
//  - The page carries no data: it is open without the API key exactly like /metrics, which it
//    polls (a server that required the key on /metrics would also have to on /dashboard).
//  - Thread safety: both functions are pure and may be called from any thread.
#pragma once

#include <string_view>

#include "server/http/http_server.h"

namespace tide::server {

// The embedded dashboard.html, with static storage duration.
std::string_view DashboardPage();

// GET /dashboard: 200, text/html; charset=utf-8, the page.
http::Response DashboardResponse();

}  // namespace tide::server
