// Black-box tests of tide's trust boundary: every route and every gRPC method
// of the one access table (server/access/access_table.h) is walked against the real `tide serve`
// with no key, a tenant's key, an admin key and a monitor key, over HTTP and gRPC, so both edges
// are seen to apply the same decisions; the browser protections with the headers a browser sends
// (a DNS-rebinding Host, a foreign Origin, a simple text/plain POST, CORS preflights); key files
// re-read on SIGHUP; an inference key that is never an admin's. One server:
//   --api-keys keys.txt (tenant, admin, monitor keys) --metrics-require-key --admin-port P
//   --cors-allow-origin https://app.example --model-control-mode explicit --load-model m
// and a second one with --api-key-file / --admin-api-key-file only.
#include <signal.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_replace.h"
#include "blackbox_support.h"
#include "gmock/gmock.h"
#include "raw_socket.h"
#include "server/access/access_table.h"

#ifdef TIDE_HAVE_GRPC
#include "google/protobuf/descriptor.h"
#include "grpc_service.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "health.grpc.pb.h"
#include "tei.grpc.pb.h"
#endif

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using tide::testing::HeaderList;
using guard::Access;

constexpr char kKeys[] =
    "tenant-secret-1 name=search\n"
    "admin-secret-2 name=ops role=admin\n"
    "monitor-secret-3 name=prom role=monitor\n";

HeaderList Bearer(const std::string& key) {
  if (key.empty()) return {};
  return {{"Authorization", "Bearer " + key}};
}

// What the table means for a key of `role` ("none" for no key) on a server whose keys have every
// role and --metrics-require-key.
bool Allowed(Access access, const std::string& role) {
  switch (access) {
    case Access::kOpen: return true;
    case Access::kTenant: return role == "tenant";
    case Access::kAdmin: return role == "admin";
    case Access::kMonitor: return role == "monitor" || role == "admin";
    case Access::kUnset: break;
  }
  return false;
}

// 401 / 403 are the only answers a refusal gives; anything else means the call went through the
// access check (and may then fail for its own reasons: a `{}` body, an unknown model).
bool Refused(int status) { return status == 401 || status == 403; }

class ServeAccessTest : public SharedServerSuite<ServeAccessTest> {
 protected:
  static void SetUpTestSuite() {
    keys_dir_ = new TempDir();
    std::ofstream(keys_dir_->path() / "keys.txt") << kKeys;
    grpc_port_ = FreePort();
    admin_port_ = FreePort();
    StartSharedServer([](const fs::path& repository) { return AddTinyBert(repository, "m", TinyBertConfig()); },
                      {"--api-keys", (keys_dir_->path() / "keys.txt").string(), "--metrics-require-key",
                       "--admin-port", std::to_string(admin_port_), "--grpc-port", std::to_string(grpc_port_),
                       "--cors-allow-origin", "https://app.example", "--model-control-mode", "explicit",
                       "--load-model", "m", "--log-level", "warn"});
  }
  static void TearDownTestSuite() {
    SharedServerSuite<ServeAccessTest>::TearDownTestSuite();
    delete keys_dir_;
    keys_dir_ = nullptr;
  }

  // An HTTP request for a table entry: {model} is `model`, {version} 1, POST/PUT bodies `{}`.
  static tide::testing::ClientResponse Call(const server::RouteEntry& e, const std::string& model,
                                            const HeaderList& headers) {
    std::string path = absl::StrReplaceAll(e.pattern, {{"{model}", model}, {"{version}", "1"}});
    const std::string method = e.method;
    auto client = NewClient();
    if (method == "GET") return client->Get(path, headers);
    HeaderList with_type = headers;
    with_type.emplace_back("Content-Type", "application/json");
    return client->Send(method, path, "{}", with_type);
  }
  // A raw request with the Host and headers a browser would send; the status, 0 when none came.
  static int RawStatus(const std::string& request, std::string* response = nullptr) {
    RawSocket socket(server().port());
    if (!socket.ok() || !socket.Send(request)) return 0;
    std::string got;
    socket.ReadFor(std::chrono::seconds(10), &got);
    if (response != nullptr) *response = got;
    if (got.size() < 12 || got.compare(0, 5, "HTTP/") != 0) return 0;
    return std::stoi(got.substr(9, 3));
  }

  static inline TempDir* keys_dir_ = nullptr;
  static inline int grpc_port_ = 0;
  static inline int admin_port_ = 0;
};

// Every route of the table, with each kind of credential: exactly the table's decision.
TEST_F(ServeAccessTest, EveryHttpRouteAnswersItsTablesDecisionForEveryRole) {
  const std::map<std::string, std::string> keys = {
      {"none", ""}, {"tenant", "tenant-secret-1"}, {"admin", "admin-secret-2"}, {"monitor", "monitor-secret-3"}};
  int walked = 0;
  for (const server::RouteEntry& e : server::RouteTable()) {
    // Admin routes name an absent model, so that an admitted load/unload/rollout changes nothing.
    const std::string model = e.access == Access::kAdmin ? "absent-model" : "m";
    for (const auto& [role, key] : keys) {
      SCOPED_TRACE(std::string(e.method) + " " + e.pattern + " as " + role);
      const auto r = Call(e, model, Bearer(key));
      EXPECT_NE(e.access, Access::kUnset) << "no decision";
      const bool allowed = Allowed(e.access, role);
      if (allowed) {
        EXPECT_FALSE(Refused(r.status)) << r.status << " " << r.body;
      } else {
        // No key: 401 with the challenge; a key of another role: 403 naming the role.
        EXPECT_EQ(r.status, role == "none" ? 401 : 403) << r.body;
        if (role == "none") {
          EXPECT_EQ(r.header("www-authenticate"), "Bearer");
        } else {
          EXPECT_THAT(r.body, HasSubstr("needs role"));
        }
        EXPECT_EQ(r.body.find(key.empty() ? "\x01" : key), std::string::npos) << "a refusal names the key";
      }
      ++walked;
    }
  }
  EXPECT_EQ(walked, static_cast<int>(server::RouteTable().size() * keys.size()));
  // The refused admin calls changed nothing: m is still the one loaded model.
  auto index = ParseJson(NewClient()->Post("/v2/repository/index", "", Bearer("admin-secret-2")).body);
  ASSERT_TRUE(index.is_array()) << index.dump();
  ASSERT_EQ(index.size(), 1u) << index.dump();
  EXPECT_EQ(index[0]["state"], "READY");
}

// The admin listener serves the monitor routes without a key, whatever --metrics-require-key says.
TEST_F(ServeAccessTest, TheAdminListenerServesMetricsWithoutAKey) {
  tide::testing::HttpClient admin(server().host(), static_cast<uint16_t>(admin_port_));
  EXPECT_EQ(admin.Get("/metrics").status, 200);
  EXPECT_EQ(admin.Get("/load").status, 200);
  EXPECT_EQ(admin.Get("/v2/health/ready").status, 200);
  EXPECT_EQ(NewClient()->Get("/metrics").status, 401);
  EXPECT_EQ(NewClient()->Get("/metrics", Bearer("monitor-secret-3")).status, 200);
}

// What a web page can make a visitor's browser send.
TEST_F(ServeAccessTest, BrowsersCannotDriveTheServerFromAnotherSite) {
  const std::string port = std::to_string(server().port());
  const std::string rerank = R"({"query":"q","texts":["a"]})";
  auto post = [&](const std::string& path, const std::string& host, const std::string& extra, const std::string& body) {
    return "POST " + path + " HTTP/1.1\r\nHost: " + host + "\r\n" + extra + "Content-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  };
  // DNS rebinding: the page's own name resolving to 127.0.0.1. Refused whatever the route.
  EXPECT_EQ(RawStatus(post("/rerank", "attacker.example:" + port,
                           "Content-Type: application/json\r\nAuthorization: Bearer tenant-secret-1\r\n", rerank)),
            403);
  EXPECT_EQ(RawStatus("GET /v2/health/ready HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n"), 403);
  EXPECT_EQ(RawStatus("GET /v2/health/ready HTTP/1.1\r\nHost: localhost:" + port + "\r\nConnection: close\r\n\r\n"),
            200);
  // A cross-site form or no-cors fetch: foreign Origin on a state-changing request.
  const std::string host = "127.0.0.1:" + port;
  EXPECT_EQ(RawStatus(post("/rerank", host,
                           "Origin: https://evil.example\r\nContent-Type: text/plain\r\nAuthorization: Bearer "
                           "tenant-secret-1\r\n",
                           rerank)),
            403);
  EXPECT_EQ(RawStatus(post("/v2/models/m/rollout/promote", host,
                           "Origin: https://evil.example\r\nAuthorization: Bearer admin-secret-2\r\n", "")),
            403);
  EXPECT_EQ(RawStatus(post("/v2/models/m/rollout/promote", host, "Origin: null\r\nAuthorization: Bearer admin-secret-2\r\n", "")),
            403);
  // The admin API needs a JSON Content-Type (a page cannot send one without a preflight): 415.
  EXPECT_EQ(RawStatus(post("/v2/repository/index", host, "Content-Type: text/plain\r\nAuthorization: Bearer admin-secret-2\r\n", "")),
            415);
  EXPECT_EQ(RawStatus(post("/v2/repository/index", host, "Authorization: Bearer admin-secret-2\r\n", "")), 415);
  EXPECT_EQ(RawStatus(post("/v2/repository/index", host,
                           "Content-Type: application/json\r\nAuthorization: Bearer admin-secret-2\r\n", "")),
            200);
  // A listed origin may call inference cross-origin and reads the answer (CORS headers).
  std::string answer;
  EXPECT_EQ(RawStatus(post("/rerank", host,
                           "Origin: https://app.example\r\nContent-Type: application/json\r\nAuthorization: Bearer "
                           "tenant-secret-1\r\n",
                           rerank),
                      &answer),
            200);
  EXPECT_THAT(answer, HasSubstr("Access-Control-Allow-Origin: https://app.example"));
  // Preflights: answered for a listed origin on an inference route; never for the admin API or
  // another origin.
  std::string preflight;
  EXPECT_EQ(RawStatus("OPTIONS /rerank HTTP/1.1\r\nHost: " + host +
                          "\r\nOrigin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n"
                          "Access-Control-Request-Headers: authorization, content-type\r\nConnection: close\r\n\r\n",
                      &preflight),
            204);
  EXPECT_THAT(preflight, HasSubstr("Access-Control-Allow-Methods: POST"));
  EXPECT_THAT(preflight, HasSubstr("authorization"));
  EXPECT_EQ(RawStatus("OPTIONS /rerank HTTP/1.1\r\nHost: " + host +
                      "\r\nOrigin: https://evil.example\r\nAccess-Control-Request-Method: POST\r\nConnection: close\r\n\r\n"),
            403);
  EXPECT_EQ(RawStatus("OPTIONS /v2/models/m/rollout HTTP/1.1\r\nHost: " + host +
                      "\r\nOrigin: https://app.example\r\nAccess-Control-Request-Method: PUT\r\nConnection: close\r\n\r\n"),
            405);
  // Non-browser clients (no Origin) keep working with any Content-Type on inference.
  EXPECT_EQ(RawStatus(post("/rerank", host, "Content-Type: application/x-www-form-urlencoded\r\nAuthorization: Bearer tenant-secret-1\r\n", rerank)),
            200);
}

#ifdef TIDE_HAVE_GRPC
// One gRPC call of `method` (full name) with one empty message, as a generic stream (it works for
// every kind of method); the final status, and whether an answer message carried `refusal` text
// (ModelStreamInfer reports per-message errors inside the stream, Triton's way).
struct GrpcOutcome {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  std::string message;
};
GrpcOutcome CallGeneric(grpc::GenericStub& stub, const std::string& method, const std::string& key, bool server_stream) {
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  if (!key.empty()) ctx.AddMetadata("authorization", "Bearer " + key);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(server_stream ? 2 : 20));
  auto next = [&cq](void* tag) {
    void* got = nullptr;
    bool ok = false;
    while (cq.Next(&got, &ok)) {
      if (got == tag) return ok;
    }
    return false;
  };
  auto call = stub.PrepareCall(&ctx, method, &cq);
  call->StartCall(reinterpret_cast<void*>(1));
  next(reinterpret_cast<void*>(1));
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1);
  call->Write(request, reinterpret_cast<void*>(2));
  next(reinterpret_cast<void*>(2));
  call->WritesDone(reinterpret_cast<void*>(3));
  next(reinterpret_cast<void*>(3));
  GrpcOutcome out;
  grpc::ByteBuffer answer;
  call->Read(&answer, reinterpret_cast<void*>(4));
  if (next(reinterpret_cast<void*>(4))) {
    std::vector<grpc::Slice> slices;
    if (answer.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) out.message.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    if (server_stream) ctx.TryCancel();  // health Watch stays open
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  next(reinterpret_cast<void*>(5));
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  out.code = status.error_code();
  out.message += status.error_message();
  return out;
}

// Every method of every service tide serves over gRPC, with each kind of credential: the same
// decisions as the HTTP routes (the table is one).
TEST_F(ServeAccessTest, EveryGrpcMethodAnswersItsTablesDecisionForEveryRole) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  // The descriptors of the generated services (linked in by naming one message of each file).
  ASSERT_NE(inference::ServerLiveRequest::descriptor(), nullptr);
  ASSERT_NE(tei::v1::InfoRequest::descriptor(), nullptr);
  ASSERT_NE(grpc::health::v1::HealthCheckRequest::descriptor(), nullptr);
  const std::map<std::string, std::string> keys = {
      {"none", ""}, {"tenant", "tenant-secret-1"}, {"admin", "admin-secret-2"}, {"monitor", "monitor-secret-3"}};
  int walked = 0;
  for (const server::RpcEntry& e : server::RpcTable()) {
    const std::string full = e.method;
    const size_t slash = full.rfind('/');
    const auto* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(full.substr(1, slash - 1));
    ASSERT_NE(service, nullptr) << full;
    const auto* method = service->FindMethodByName(full.substr(slash + 1));
    ASSERT_NE(method, nullptr) << full;
    for (const auto& [role, key] : keys) {
      SCOPED_TRACE(full + " as " + role);
      const GrpcOutcome r = CallGeneric(stub, full, key, method->server_streaming() && !method->client_streaming());
      EXPECT_NE(e.access, Access::kUnset) << "no decision";
      const bool allowed = Allowed(e.access, role);
      const bool refused_in_stream = r.message.find("API key") != std::string::npos ||
                                     r.message.find("needs role") != std::string::npos;
      if (allowed) {
        EXPECT_NE(r.code, grpc::StatusCode::UNAUTHENTICATED) << r.message;
        EXPECT_NE(r.code, grpc::StatusCode::PERMISSION_DENIED) << r.message;
        EXPECT_FALSE(refused_in_stream) << r.message;
      } else {
        const grpc::StatusCode expected =
            role == "none" ? grpc::StatusCode::UNAUTHENTICATED : grpc::StatusCode::PERMISSION_DENIED;
        EXPECT_TRUE(r.code == expected || (r.code == grpc::StatusCode::OK && refused_in_stream))
            << "got " << r.code << ": " << r.message;
      }
      ++walked;
    }
  }
  EXPECT_EQ(walked, static_cast<int>(server::RpcTable().size() * keys.size()));
}
#endif

// Secrets from files: the inference key and the admin key each in a file, re-read on SIGHUP; the
// inference key is never an admin's; a bad file at SIGHUP keeps the keys in force.
TEST(ServeAccessKeyFilesTest, KeyFilesAreReadAtStartAndOnSighupAndRolesStaySeparate) {
  TempDir dir;
  const fs::path api = dir.path() / "api-key", admin = dir.path() / "admin-key";
  auto write = [](const fs::path& file, const std::string& text) {
    const fs::path tmp = file.string() + ".tmp";
    std::ofstream(tmp) << text;
    fs::rename(tmp, file);
  };
  write(api, "inference-key-1\n");
  write(admin, "admin-key-1\n");
  SharedServer shared;
  shared.Start([](const fs::path& repository) { return AddTinyBert(repository, "m", TinyBertConfig()); },
               {"--api-key-file", api.string(), "--admin-api-key-file", admin.string(), "--log-level", "info"});
  ASSERT_TRUE(shared.error().empty()) << shared.error();
  tide::testing::ServerProcess& server = *shared.process();
  tide::testing::HttpClient client(server.host(), server.port());
  const std::string rerank = R"({"query":"q","texts":["a"]})";
  EXPECT_EQ(client.Post("/rerank", rerank, Bearer("inference-key-1")).status, 200);
  EXPECT_EQ(client.Post("/rerank", rerank).status, 401);
  EXPECT_EQ(client.Post("/rerank", rerank, Bearer("admin-key-1")).status, 403);
  EXPECT_EQ(client.Get("/v2/models/m/rollout", Bearer("inference-key-1")).status, 403);
  EXPECT_EQ(client.Get("/v2/models/m/rollout", Bearer("admin-key-1")).status, 200);
  // The key never reaches the command line.
  std::ifstream cmdline("/proc/" + std::to_string(server.pid()) + "/cmdline");
  const std::string args((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  EXPECT_EQ(args.find("admin-key-1"), std::string::npos);
  EXPECT_EQ(args.find("inference-key-1"), std::string::npos);

  // Rotation: new files, SIGHUP; the old admin key stops working.
  write(admin, "admin-key-2\n");
  ASSERT_TRUE(server.Signal(SIGHUP).ok());
  EXPECT_TRUE(WaitFor([&] { return client.Get("/v2/models/m/rollout", Bearer("admin-key-2")).status == 200; },
                      std::chrono::seconds(10), "the new admin key to be accepted"));
  EXPECT_EQ(client.Get("/v2/models/m/rollout", Bearer("admin-key-1")).status, 401);
  EXPECT_EQ(client.Post("/rerank", rerank, Bearer("inference-key-1")).status, 200);
  // An empty file at SIGHUP is refused and the keys in force stay.
  write(admin, "\n");
  ASSERT_TRUE(server.Signal(SIGHUP).ok());
  std::string log;
  EXPECT_TRUE(WaitFor(
      [&] {
        log = server.Stdout() + server.Stderr();
        return log.find("keeping the current API keys") != std::string::npos;
      },
      std::chrono::seconds(10), "tide to refuse the empty keys file"))
      << log;
  EXPECT_EQ(client.Get("/v2/models/m/rollout", Bearer("admin-key-2")).status, 200);
}

// A server with tenants but no admin credential: the admin API is disabled (403 saying how to
// enable it), never open; the same key file must not hold the admin key and the inference key.
TEST(ServeAccessKeyFilesTest, TenantsWithoutAnAdminKeyDisableTheAdminApiAndBadKeyFilesRefuseToStart) {
  TempDir dir;
  const fs::path keys = dir.path() / "keys.txt";
  std::ofstream(keys) << "tenant-only-1 name=t\n";
  SharedServer shared;
  shared.Start([](const fs::path& repository) { return AddTinyBert(repository, "m", TinyBertConfig()); },
               {"--api-keys", keys.string(), "--model-control-mode", "explicit", "--load-model", "m",
                "--log-level", "warn"});
  ASSERT_TRUE(shared.error().empty()) << shared.error();
  tide::testing::HttpClient client(shared.process()->host(), shared.process()->port());
  for (const std::string& key : {std::string(), std::string("tenant-only-1")}) {
    auto r = client.Post("/v2/repository/models/m/unload", "", Bearer(key));
    EXPECT_EQ(r.status, 403) << r.body;
    EXPECT_THAT(r.body, HasSubstr("admin API is disabled"));
    EXPECT_THAT(r.body, HasSubstr("--admin-api-key-file"));
  }
  EXPECT_EQ(client.Post("/rerank", R"({"query":"q","texts":["a"]})", Bearer("tenant-only-1")).status, 200);
  EXPECT_THAT(shared.process()->Stdout() + shared.process()->Stderr(), HasSubstr("the admin API (repository, rollout) is disabled"));

  // Start-up refusals: an empty key file, the same key for both roles.
  const fs::path empty = dir.path() / "empty", same = dir.path() / "same";
  std::ofstream(empty) << "\n";
  std::ofstream(same) << "k-same\n";
  auto run = [&](const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {TideBinary().string(), "serve", "--model-repository", dir.path().string(),
                                     "--port", "0", "--grpc-port", "0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return RunCommand(argv);
  };
  auto r1 = run({"--admin-api-key-file", empty.string()});
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_NE(r1->exit_code, 0);
  EXPECT_THAT(r1->output, HasSubstr("--admin-api-key-file"));
  auto r2 = run({"--api-key-file", same.string(), "--admin-api-key-file", same.string()});
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_NE(r2->exit_code, 0);
  EXPECT_THAT(r2->output, HasSubstr("must differ"));
  // Browser-protection flags that could never match are refused, naming the flag.
  auto r3 = run({"--cors-allow-origin", "app.example"});
  ASSERT_TRUE(r3.ok()) << r3.status();
  EXPECT_NE(r3->exit_code, 0);
  EXPECT_THAT(r3->output, HasSubstr("--cors-allow-origin: 'app.example' is not an origin"));
  auto r4 = run({"--allowed-hosts", "localhost:8000"});
  ASSERT_TRUE(r4.ok()) << r4.status();
  EXPECT_NE(r4->exit_code, 0);
  EXPECT_THAT(r4->output, HasSubstr("--allowed-hosts: 'localhost:8000'"));
}

}  // namespace
}  // namespace tide::blackbox
