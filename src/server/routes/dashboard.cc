#include "server/routes/dashboard.h"

namespace tide::server {
namespace internal {
extern const std::string_view kDashboardHtml;  // dashboard_page.cc, generated from dashboard.html
}  // namespace internal

std::string_view DashboardPage() { return internal::kDashboardHtml; }

http::Response DashboardResponse() {
  http::Response r;
  r.content_type = "text/html; charset=utf-8";
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.body = std::string(DashboardPage());
  return r;
}

}  // namespace tide::server
