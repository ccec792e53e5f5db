// The rollout API's HTTP edge over a service core with two fake versions of one model: the admin
// key, body checks, the GET shape before and after a PUT, promote and rollback.
#include "server/routes/rollout_routes.h"

#include "server/http/browser_checks.h"
#include "server/routes/service.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "api/status_http.h"
#include "serving/model_manager.h"
#include "serving/rollout_json.h"
#include "serving/testing/fake_backend.h"

namespace tide::server {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

TEST(ParseRolloutJson, FieldsDefaultsAndErrors) {
  auto put = serving::ParseRolloutJson(R"({"candidate": "2", "mode": "canary", "percent": 10, "sticky_header": "X-User-Id",
      "guard": {"min_requests": 200, "max_error_rate": 0.01, "max_p99_ratio": 1.5, "min_spearman": 0.9,
      "min_top1": 0.8, "min_cosine": 0.97}})");
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->spec.candidate, 2);
  EXPECT_FALSE(put->stable.has_value());
  EXPECT_EQ(put->spec.mode, serving::RolloutMode::kCanary);
  EXPECT_EQ(put->spec.percent, 10);
  EXPECT_EQ(put->spec.sticky_header, "x-user-id");
  EXPECT_EQ(put->spec.guard.min_requests, 200);
  EXPECT_DOUBLE_EQ(put->spec.guard.min_top1, 0.8);
  EXPECT_DOUBLE_EQ(put->spec.guard.min_cosine, 0.97);
  auto shadow = serving::ParseRolloutJson(R"({"candidate": 3, "mode": "shadow", "stable": "1"})");
  ASSERT_TRUE(shadow.ok()) << shadow.status();
  EXPECT_EQ(shadow->spec.percent, 100);
  EXPECT_EQ(*shadow->stable, 1);
  for (const char* bad : {R"({})", R"({"candidate": "x"})", R"({"candidate": 0})", R"({"candidate": "2", "mode": "blue"})",
                          R"({"candidate": "2", "percent": 150})", R"({"candidate": "2", "guard": {"min_top1": 2}})",
                          R"({"candidate": "2", "guard": {"min_cosine": 1.5}})",
                          R"({"candidate": "2", "guard": {"min_requests": 0}})", R"({"candidate": "2", "colour": 1})",
                          R"({"candidate": "2", "guard": {"max_p50": 1}})", R"([])"}) {
    auto r = serving::ParseRolloutJson(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(api::HttpStatusFor(r.status()), 422) << bad << " " << r.status();
  }
  EXPECT_EQ(api::HttpStatusFor(serving::ParseRolloutJson("{").status()), 400);
}

class RolloutRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = serving::ServingMetrics::Create();
    ASSERT_TRUE(m.ok());
    metrics_ = *std::move(m);
    models_ = serving::ModelManager::Create(metrics_.get());
    for (int64_t v : {1, 2}) {
      serving::testing::ModelSpec spec;
      spec.name = "m";
      spec.version = v;
      ASSERT_TRUE(models_->Add(serving::testing::Served(spec, std::make_shared<serving::testing::BackendControl>())).ok());
    }
    serving::ServiceCoreOptions o;
    o.tokenization_workers = 1;
    o.rollout_check_interval = std::chrono::milliseconds(0);
    o.api_key = "tenant-k3y";
    o.admin_api_key = "k3y";
    auto c = serving::ServiceCore::Create(models_.get(), metrics_.get(), o);
    ASSERT_TRUE(c.ok());
    core_ = *std::move(c);
    routes_ = std::make_unique<RolloutRoutes>(core_.get(), RolloutRoutesOptions{});
  }
  void TearDown() override {
    routes_.reset();
    core_.reset();
    models_.reset();
  }
  static http::Request Req(std::string method, std::string body = {}, std::string key = "k3y") {
    http::Request r;
    r.method = std::move(method);
    r.body = std::move(body);
    if (!key.empty()) r.headers.emplace_back("Authorization", "Bearer " + key);
    return r;
  }

  std::unique_ptr<serving::ServingMetrics> metrics_;
  std::unique_ptr<serving::ModelManager> models_;
  std::unique_ptr<serving::ServiceCore> core_;
  std::unique_ptr<RolloutRoutes> routes_;
};

// The route table's decisions as the HTTP Service applies them in front of the rollout routes:
// the admin key only (a tenant's key is forbidden), a JSON Content-Type on the state-changing
// ones, no foreign Origin, no foreign Host; refusals change nothing.
TEST_F(RolloutRoutesTest, TheServiceLetsOnlyTheAdminKeyThroughFromThisOrigin) {
  ServiceOptions so;
  so.rollout = routes_.get();
  so.allowed_hosts = http::DefaultAllowedHosts("127.0.0.1");
  const pipeline::RequestPipeline request_pipeline(core_.get(), pipeline::CompletionRecorder(nullptr, nullptr), {});
  auto service = Service::Create(core_.get(), &request_pipeline, so);
  ASSERT_TRUE(service.ok()) << service.status();
  auto send = [&](std::string method, std::string target, std::string key, std::string body,
                  std::vector<std::pair<std::string, std::string>> headers) {
    http::Request r = Req(std::move(method), std::move(body), std::move(key));
    r.target = r.path = std::move(target);
    r.headers.emplace_back("Host", "127.0.0.1:8000");
    for (auto& h : headers) r.headers.push_back(std::move(h));
    std::optional<http::Response> out;
    (*service)->handler()->Handle(std::move(r), http::Responder::FromCallback([&out](http::Response resp) {
      out = std::move(resp);
    }));
    EXPECT_TRUE(out.has_value());
    return out.value_or(http::Response{});
  };
  const std::vector<std::pair<std::string, std::string>> json_type = {{"Content-Type", "application/json"}};
  for (const std::string& key : {std::string(), std::string("wrong")}) {
    http::Response r = send("PUT", "/v2/models/m/rollout", key, R"({"candidate": "1"})", json_type);
    EXPECT_EQ(r.status, 401) << r.body;
    bool challenge = false;
    for (const auto& [name, value] : r.headers) challenge = challenge || (name == "WWW-Authenticate" && value == "Bearer");
    EXPECT_TRUE(challenge);
    EXPECT_EQ(send("GET", "/v2/models/m/rollout", key, "", {}).status, 401);
    EXPECT_EQ(send("POST", "/v2/models/m/rollout/promote", key, "", json_type).status, 401);
  }
  // The tenant's key may rerank, never roll out.
  http::Response tenant = send("PUT", "/v2/models/m/rollout", "tenant-k3y", R"({"candidate": "1"})", json_type);
  EXPECT_EQ(tenant.status, 403) << tenant.body;
  EXPECT_THAT(tenant.body, ::testing::HasSubstr("needs role admin"));
  // A web page's simple request: no preflight, so no JSON type: 415 even with the key.
  for (const char* type : {"", "text/plain", "application/x-www-form-urlencoded"}) {
    std::vector<std::pair<std::string, std::string>> h;
    if (*type != '\0') h.emplace_back("Content-Type", type);
    EXPECT_EQ(send("POST", "/v2/models/m/rollout/rollback", "k3y", "", h).status, 415) << type;
  }
  // Another origin, or a rebinding page's Host: 403.
  auto foreign = json_type;
  foreign.emplace_back("Origin", "https://evil.example");
  EXPECT_EQ(send("PUT", "/v2/models/m/rollout", "k3y", R"({"candidate": "1"})", foreign).status, 403);
  EXPECT_EQ(send("GET", "/v2/models/m/rollout", "k3y", "", {{"Origin", "https://evil.example"}}).status, 403);
  EXPECT_FALSE(core_->RolloutStatusOf("m").has_value());
  // The admin key from this origin goes through.
  auto same = json_type;
  same.emplace_back("Origin", "http://127.0.0.1:8000");
  http::Response ok = send("PUT", "/v2/models/m/rollout", "k3y", R"({"candidate": "1", "mode": "shadow"})", same);
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_TRUE(core_->RolloutStatusOf("m").has_value());
}

TEST_F(RolloutRoutesTest, PutBodiesAndWindowsAreBounded) {
  http::Response window = routes_->Put(Req("PUT", R"({"candidate": "2", "window": 1000000})"), "m");
  EXPECT_EQ(window.status, 422);
  EXPECT_EQ(json::parse(window.body)["error"], "window must be an integer within 1..100000");
  http::Response deep = routes_->Put(Req("PUT", std::string(100000, '{') + std::string(100000, '}')), "m");
  EXPECT_EQ(deep.status, 422);
  http::Response big =
      routes_->Put(Req("PUT", R"({"candidate": "2", "sticky_header": ")" + std::string(1 << 20, 'x') + R"("})"), "m");
  EXPECT_EQ(big.status, 413);
  EXPECT_FALSE(core_->RolloutStatusOf("m").has_value());  // nothing started
  http::Response at_max = routes_->Put(Req("PUT", R"({"candidate": "2", "window": 100000})"), "m");
  ASSERT_EQ(at_max.status, 200) << at_max.body;
  EXPECT_EQ(json::parse(at_max.body)["window"], 100000);
}

TEST_F(RolloutRoutesTest, PutGetPromoteRollback) {
  http::Response idle = routes_->Get(Req("GET"), "m");
  ASSERT_EQ(idle.status, 200) << idle.body;
  json j = json::parse(idle.body);
  EXPECT_EQ(j["stable"], "2");
  EXPECT_EQ(j["mode"], "none");
  EXPECT_EQ(j["state"], "idle");
  EXPECT_EQ(routes_->Get(Req("GET"), "nope").status, 404);
  EXPECT_EQ(routes_->Put(Req("PUT", R"({"candidate": "7"})"), "m").status, 404);
  EXPECT_EQ(routes_->Put(Req("PUT", R"({"candidate": "2", "percent": -1})"), "m").status, 422);
  EXPECT_EQ(routes_->Promote(Req("POST"), "m").status, 404);  // no rollout yet

  http::Response put = routes_->Put(
      Req("PUT", R"({"candidate": "2", "mode": "canary", "percent": 10, "guard": {"min_requests": 50}})"), "m");
  ASSERT_EQ(put.status, 200) << put.body;
  j = json::parse(put.body);
  EXPECT_EQ(j["stable"], "1");  // the newest version besides the candidate
  EXPECT_EQ(j["candidate"], "2");
  EXPECT_EQ(j["mode"], "canary");
  EXPECT_EQ(j["percent"], 10);
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["guard"]["min_requests"], 50);
  EXPECT_TRUE(j["stats"].contains("1"));
  EXPECT_TRUE(j["stats"].contains("2"));
  EXPECT_EQ(j["agreement"]["pairs"], 0);

  http::Response promoted = routes_->Promote(Req("POST"), "m");
  ASSERT_EQ(promoted.status, 200);
  EXPECT_EQ(json::parse(promoted.body)["state"], "promoted");
  // The fast rollback undoes the promotion; a second one has nothing left to undo.
  http::Response undone = routes_->Rollback(Req("POST"), "m");
  ASSERT_EQ(undone.status, 200) << undone.body;
  EXPECT_EQ(json::parse(undone.body)["stable"], "1");
  EXPECT_EQ(routes_->Rollback(Req("POST"), "m").status, 422);  // not running
  ASSERT_EQ(routes_->Promote(Req("POST"), "m").status, 422);   // rolled back: start a new rollout
  put = routes_->Put(Req("PUT", R"({"candidate": "2", "mode": "canary", "percent": 10})"), "m");
  ASSERT_EQ(put.status, 200) << put.body;
  ASSERT_EQ(routes_->Promote(Req("POST"), "m").status, 200);

  // The next rollout's stable is the promoted version.
  put = routes_->Put(Req("PUT", R"({"candidate": "1", "mode": "shadow"})"), "m");
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(json::parse(put.body)["stable"], "2");
  EXPECT_EQ(json::parse(put.body)["percent"], 100);
  http::Response back = routes_->Rollback(Req("POST"), "m");
  ASSERT_EQ(back.status, 200);
  j = json::parse(back.body);
  EXPECT_EQ(j["state"], "rolled_back");
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("manual"));
  EXPECT_EQ(metrics_->rollout_rollbacks->WithLabels({"m", "manual"})->Value(), 2);
}

}  // namespace
}  // namespace tide::server
