#include "server/routes/dashboard.h"

#include <map>
#include <regex>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "serving/serving_metrics.h"

namespace tide::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(DashboardTest, ServesTheEmbeddedPageAsHtml) {
  const http::Response r = DashboardResponse();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_THAT(r.body, StartsWith("<!DOCTYPE html>"));
  EXPECT_THAT(r.body, HasSubstr("</html>"));
  EXPECT_EQ(r.body, std::string(DashboardPage()));
}

// The page must work on a machine without internet: nothing it loads may come from elsewhere.
TEST(DashboardTest, PageIsSelfContained) {
  const std::string page(DashboardPage());
  EXPECT_THAT(page, Not(HasSubstr("http://")));
  EXPECT_THAT(page, Not(HasSubstr("https://")));
  EXPECT_THAT(page, Not(HasSubstr("<link")));
  EXPECT_THAT(page, Not(HasSubstr("@import")));
  EXPECT_THAT(page, Not(HasSubstr("url(")));
  EXPECT_THAT(page, Not(HasSubstr("src=")));
  // It polls the server's own metrics through a relative URL (works on the admin port too).
  EXPECT_THAT(page, HasSubstr("fetch(\"metrics\""));
  // Its only other request, a model's rollout, is relative too.
  EXPECT_THAT(page, HasSubstr("fetch(\"v2/models/\" + encodeURIComponent("));
}

// Every tide_* family the page reads is one the server exports.
TEST(DashboardTest, EveryMetricThePageReadsExists) {
  auto metrics = serving::ServingMetrics::Create();
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  // The registry answers AlreadyExists for a registered family name (it renders no family without
  // series, so its text cannot list them on a fresh server).
  metrics::Registry& registry = (*metrics)->registry;
  // A probe registers an unknown name, so each name is probed once and the answer remembered.
  std::map<std::string, bool> known;
  auto registered = [&registry, &known](const std::string& n) {
    auto [it, inserted] = known.try_emplace(n, false);
    if (inserted) it->second = registry.AddGauge(n, "probe", {}).status().code() == absl::StatusCode::kAlreadyExists;
    return it->second;
  };
  const std::string page(DashboardPage());
  const std::regex name(R"(\btide_[a-z_]+)");
  int checked = 0;
  for (auto it = std::sregex_iterator(page.begin(), page.end(), name); it != std::sregex_iterator(); ++it) {
    std::string n = (*it)[0].str();
    for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
      if (n.ends_with(suffix) && registered(n.substr(0, n.size() - suffix.size()))) n.resize(n.size() - suffix.size());
    }
    EXPECT_TRUE(registered(n)) << n << " is read by dashboard.html but not registered by ServingMetrics";
    ++checked;
  }
  EXPECT_GT(checked, 15);
}

}  // namespace
}  // namespace tide::server
