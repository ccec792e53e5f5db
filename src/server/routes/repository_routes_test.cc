// The repository API's HTTP edge without a model: body parsing, the index's JSON
// shape, and errors from the one status table (the controller's own behaviour is tested in
// src/serving/model_repository_controller_test.cc).
#include "server/routes/repository_routes.h"

#include <memory>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "serving/model_manager.h"

namespace tide::server {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

class RepositoryRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    manager_ = serving::ModelManager::Create();
    // Mode none, never started: an empty index, and Load / Unload refused for the mode. Nothing is
    // loaded, so the factory and the signature reader (always injected) are never called.
    serving::ModelRepositoryControllerOptions o;
    o.run_thread = false;
    o.factory = [](const config::RepositoryModel&, const config::ModelVersion&, const serving::ServedModelOptions&)
        -> absl::StatusOr<std::unique_ptr<serving::ServedModel>> { return absl::InternalError("not called"); };
    o.repository_options.read_signature = [](const std::filesystem::path&) -> absl::StatusOr<ModelSignature> {
      return absl::InternalError("not called");
    };
    auto c = serving::ModelRepositoryController::Create(manager_.get(), o);
    ASSERT_TRUE(c.ok()) << c.status();
    controller_ = *std::move(c);
    routes_ = std::make_unique<RepositoryRoutes>(controller_.get(), RepositoryRoutesOptions{});
  }

  static http::Request Post(std::string body, std::string key = "k3y") {
    http::Request r;
    r.method = "POST";
    r.body = std::move(body);
    if (!key.empty()) r.headers.emplace_back("Authorization", "Bearer " + key);
    return r;
  }

  // Load's answer (synchronous here: the controller runs without a thread).
  http::Response Load(const http::Request& r, const std::string& model = "m") {
    std::optional<http::Response> out;
    routes_->Load(r, model, http::Responder::FromCallback([&out](http::Response resp) { out = std::move(resp); }));
    EXPECT_TRUE(out.has_value());
    return out.value_or(http::Response{});
  }

  std::unique_ptr<serving::ModelManager> manager_;
  std::unique_ptr<serving::ModelRepositoryController> controller_;
  std::unique_ptr<RepositoryRoutes> routes_;
};

TEST_F(RepositoryRoutesTest, IndexIsAnArrayAndTakesReady) {
  http::Response r = routes_->Index(Post(R"({"ready": true})"));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body), json::array());
  EXPECT_EQ(routes_->Index(Post("{not json")).status, 400);
  EXPECT_EQ(routes_->Index(Post(R"({"ready": "yes"})")).status, 422);
  EXPECT_EQ(routes_->Index(Post("[]")).status, 422);
}

TEST_F(RepositoryRoutesTest, LoadChecksItsBodyThenAnswersTheControllersError) {
  http::Response file = Load(Post(R"({"parameters": {"file:1/model.onnx": "AAAA"}})"));
  EXPECT_EQ(file.status, 422);
  EXPECT_THAT(file.body, HasSubstr("unsupported"));
  EXPECT_EQ(Load(Post(R"({"parameters": {"config": {"max_batch_size": 4}}})")).status, 422);
  // Mode none: load is refused with 403 naming the mode.
  http::Response none = Load(Post(R"({"parameters": {"config": "{}"}})"));
  EXPECT_EQ(none.status, 403);
  EXPECT_THAT(none.body, HasSubstr("explicit"));
  std::optional<http::Response> unload;
  routes_->Unload(Post(""), "m", http::Responder::FromCallback([&](http::Response r) { unload = std::move(r); }));
  ASSERT_TRUE(unload.has_value());
  EXPECT_EQ(unload->status, 403);
}

// Every body gets the admin input pre-scan before it is parsed: size (413), depth and strings (422).
TEST_F(RepositoryRoutesTest, BodiesAreBoundedBeforeTheyAreParsed) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  http::Response index = routes_->Index(Post(deep));
  EXPECT_EQ(index.status, 422);
  EXPECT_THAT(json::parse(index.body)["error"].get<std::string>(), HasSubstr("max_json_depth=16"));
  EXPECT_EQ(Load(Post(deep)).status, 422);
  std::string strings = "[";
  for (int i = 0; i < 20000; ++i) strings += i == 0 ? "\"\"" : ",\"\"";
  EXPECT_EQ(Load(Post(strings + "]")).status, 422);
  http::Response big = Load(Post(R"({"parameters": {"config": ")" + std::string(1 << 20, ' ') + R"("}})"));
  EXPECT_EQ(big.status, 413);
  EXPECT_EQ(json::parse(big.body)["error_type"], "validation");
  std::optional<http::Response> unload;
  routes_->Unload(Post(deep), "m", http::Responder::FromCallback([&](http::Response r) { unload = std::move(r); }));
  ASSERT_TRUE(unload.has_value());
  EXPECT_EQ(unload->status, 422);
  // Within the bounds, the body reaches the controller (mode none: 403).
  EXPECT_EQ(Load(Post(R"({"parameters": {"config": "{}"}})")).status, 403);
}

TEST(RepositoryRouteHandler, WithoutRoutesEveryPathIs404) {
  http::RouteHandler h = RepositoryRouteHandler(nullptr, Endpoint::kRepositoryIndex);
  std::optional<http::Response> out;
  h(http::Request{}, http::PathParams{}, http::Responder::FromCallback([&](http::Response r) { out = std::move(r); }));
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->status, 404);
}

}  // namespace
}  // namespace tide::server
