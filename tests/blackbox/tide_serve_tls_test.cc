// Black-box tests of TLS on tide serve's edges (--tls-cert-file, --tls-key-file,
// --tls-client-ca-file): HTTPS and gRPC over TLS with a throwaway CA made at test time by the
// openssl CLI (tests/support/test_pki.h), mutual TLS, a plaintext client on the TLS port, the
// certificate reloaded on SIGHUP (open connections keep working, new ones see the new certificate,
// a broken pair is refused and the old one keeps serving) and bad flags refused at start.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "blackbox_support.h"
#include "raw_socket.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_client.h"
#include "test_pki.h"

#ifdef TIDE_HAVE_GRPC
#include "grpc_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tei.grpc.pb.h"
#endif

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using tide::testing::ClientResponse;
using tide::testing::HttpClient;
using tide::testing::ServerProcess;
using Steady = std::chrono::steady_clock;

constexpr char kRerank[] = R"({"query": "panda", "texts": ["a giant panda eats bamboo", "a city at night"]})";
constexpr auto kTimeout = std::chrono::milliseconds(30000);

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The scores of a /rerank answer, by document index.
std::vector<double> Scores(const ClientResponse& response) {
  const nlohmann::json body = ParseJson(response.body);
  std::vector<double> scores;
  if (!body.is_array()) return scores;
  scores.resize(body.size());
  for (const auto& item : body) {
    const size_t index = item.value("index", size_t{0});
    if (index < scores.size()) scores[index] = item.value("score", 0.0);
  }
  return scores;
}

// Everything a server of this suite needs: the PKI, a repository with tiny-bert, and the server.
struct TlsServer {
  std::unique_ptr<ServerProcess> process;
  int grpc_port = 0;
  int admin_port = 0;
};

class ServeTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    auto pki = tide::testing::MakeTestPki((dir_->path() / "pki").string());
    if (!pki.ok()) {
      setup_error_ = pki.status().ToString();
      return;
    }
    pki_ = new tide::testing::TestPki(*pki);
    // The TLS server serves copies, which the SIGHUP test replaces.
    fs::copy_file(pki_->server_cert, CertFile());
    fs::copy_file(pki_->server_key, KeyFile());
    if (absl::Status s = AddTinyBert(Repository(), "m", TinyBertConfig()); !s.ok()) {
      setup_error_ = s.ToString();
      return;
    }
    plain_ = new TlsServer(Start({}, /*tls=*/false));
    tls_ = new TlsServer(Start({"--tls-cert-file", CertFile().string(), "--tls-key-file", KeyFile().string()}, true));
    mtls_ = new TlsServer(Start({"--tls-cert-file", pki_->server_cert, "--tls-key-file", pki_->server_key,
                                 "--tls-client-ca-file", pki_->ca_cert},
                                true));
  }

  static void TearDownTestSuite() {
    delete plain_;
    delete tls_;
    delete mtls_;
    delete pki_;
    delete dir_;  // last: the servers read their files from it
    plain_ = tls_ = mtls_ = nullptr;
    pki_ = nullptr;
    dir_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    for (TlsServer* server : {plain_, tls_, mtls_}) ASSERT_NE(server->process, nullptr) << setup_error_;
  }

  void TearDown() override {
    if (!HasFailure()) return;
    for (TlsServer* server : {plain_, tls_, mtls_}) {
      if (server != nullptr && server->process != nullptr) std::cerr << server->process->Diagnostics() << "\n";
    }
  }

  static fs::path Repository() { return dir_->path() / "repo"; }
  static fs::path CertFile() { return dir_->path() / "served.crt"; }
  static fs::path KeyFile() { return dir_->path() / "served.key"; }

  static tls::ClientTlsOptions Trust(bool client_cert = false) {
    tls::ClientTlsOptions options;
    options.ca_file = pki_->ca_cert;
    if (client_cert) {
      options.cert_file = pki_->client_cert;
      options.key_file = pki_->client_key;
    }
    return options;
  }

  static TlsServer Start(std::vector<std::string> flags, bool tls) {
    TlsServer server;
    server.grpc_port = FreePort();
    server.admin_port = FreePort();
    tide::testing::ServerProcessOptions options;
    options.binary = TideBinary().string();
    options.args = {"serve", "--model-repository", Repository().string(), "--log-level", "info",
                    "--grpc-port", std::to_string(server.grpc_port), "--admin-port", std::to_string(server.admin_port)};
    options.args.insert(options.args.end(), flags.begin(), flags.end());
    options.startup_timeout = std::chrono::milliseconds(120000);
    auto process = ServerProcess::Start(options);
    if (!process.ok()) {
      setup_error_ += process.status().ToString() + "\n";
      return server;
    }
    server.process = *std::move(process);
    (void)tls;
    return server;
  }

  // A client of `server` speaking TLS (trusting the test CA; with the client certificate when
  // `client_cert`), or plaintext when `tls` is false.
  static std::unique_ptr<HttpClient> Client(const TlsServer& server, bool tls, bool client_cert = false,
                                            uint16_t port = 0) {
    auto client = std::make_unique<HttpClient>("127.0.0.1", port != 0 ? port : server.process->port(), kTimeout);
    if (tls) {
      EXPECT_TRUE(client->UseTls(Trust(client_cert)).ok());
    }
    return client;
  }

  // The server's log so far (spdlog writes to stdout, gRPC's own messages go to stderr).
  static std::string Log(const ServerProcess& process) { return process.Stdout() + process.Stderr(); }

  // Waits until the server's log contains `text` (a SIGHUP is handled asynchronously).
  static ::testing::AssertionResult WaitForLog(const ServerProcess& process, const std::string& text) {
    return WaitFor([&] { return Log(process).find(text) != std::string::npos; }, std::chrono::seconds(20),
                   "the log line \"" + text + "\"");
  }

  static inline TempDir* dir_ = nullptr;
  static inline tide::testing::TestPki* pki_ = nullptr;
  static inline TlsServer* plain_ = nullptr;
  static inline TlsServer* tls_ = nullptr;
  static inline TlsServer* mtls_ = nullptr;
  static inline std::string setup_error_;
};

TEST_F(ServeTlsTest, StartupLinesSayHttps) {
  EXPECT_THAT(tls_->process->Stdout(), HasSubstr("tide: listening on https://127.0.0.1:"));
  EXPECT_THAT(tls_->process->Stdout(), HasSubstr("tide: admin (health, metrics) on https://127.0.0.1:"));
  EXPECT_THAT(tls_->process->Stdout(), HasSubstr("(TLS)"));
  EXPECT_THAT(Log(*tls_->process), HasSubstr("tls: certificate subject=/CN=tide test server, serial=03E9"));
  // No TLS flag: exactly the plaintext server of before.
  EXPECT_THAT(plain_->process->Stdout(), HasSubstr("tide: listening on http://127.0.0.1:"));
  EXPECT_THAT(plain_->process->Stdout(), Not(HasSubstr("https://")));
}

TEST_F(ServeTlsTest, RerankOverHttpsScoresAsPlaintext) {
  auto https = Client(*tls_, true);
  const ClientResponse secure = https->Post("/rerank", kRerank);
  ASSERT_EQ(secure.status, 200) << secure.error << secure.body;
  EXPECT_THAT(https->PeerCertificate(), HasSubstr("CN=tide test server"));
  auto http = Client(*plain_, false);
  const ClientResponse plain = http->Post("/rerank", kRerank);
  ASSERT_EQ(plain.status, 200) << plain.error << plain.body;
  const std::vector<double> a = Scores(secure);
  const std::vector<double> b = Scores(plain);
  ASSERT_EQ(a.size(), 2u) << secure.body;
  ASSERT_EQ(b.size(), 2u) << plain.body;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << i;
  // Keep-alive: a second request on the same TLS connection.
  const ClientResponse again = https->Post("/rerank", kRerank);
  EXPECT_EQ(again.status, 200) << again.error;
  // The admin listener serves HTTPS with the same certificate.
  auto admin = Client(*tls_, true, false, static_cast<uint16_t>(tls_->admin_port));
  const ClientResponse ready = admin->Get("/v2/health/ready");
  EXPECT_EQ(ready.status, 200) << ready.error;
  EXPECT_THAT(admin->PeerCertificate(), HasSubstr("CN=tide test server"));
}

TEST_F(ServeTlsTest, PlaintextRequestOnTheTlsPortIsNotServed) {
  for (uint16_t port : {tls_->process->port(), static_cast<uint16_t>(tls_->admin_port)}) {
    HttpClient client("127.0.0.1", port, kTimeout);
    ASSERT_TRUE(client.SendRaw("GET /v2/health/ready HTTP/1.1\r\nHost: localhost\r\n\r\n").ok());
    const auto raw = client.ReadUntilClosed(kTimeout);
    EXPECT_TRUE(raw.closed) << port;
    EXPECT_THAT(raw.bytes, Not(HasSubstr("200 OK"))) << port;
    EXPECT_THAT(raw.bytes, Not(HasSubstr("HTTP/1.1"))) << port;
  }
  // A client that does not trust the server's CA does not get through either.
  HttpClient untrusting("127.0.0.1", tls_->process->port(), kTimeout);
  tls::ClientTlsOptions system_roots;  // the system's CAs, which never signed the test CA
  ASSERT_TRUE(untrusting.UseTls(system_roots).ok());
  const ClientResponse refused = untrusting.Get("/v2/health/ready");
  EXPECT_EQ(refused.status, 0);
  EXPECT_THAT(refused.error, HasSubstr("certificate verify failed"));
}

TEST_F(ServeTlsTest, MutualTlsNeedsAClientCertificateSignedByTheCa) {
  auto without = Client(*mtls_, true, /*client_cert=*/false);
  const ClientResponse refused = without->Post("/rerank", kRerank);
  EXPECT_EQ(refused.status, 0) << refused.body;
  EXPECT_FALSE(refused.error.empty());

  // A certificate from another CA: refused as well.
  const std::string other_dir = (dir_->path() / "other-pki").string();
  auto other = tide::testing::MakeTestPki(other_dir);
  ASSERT_TRUE(other.ok()) << other.status();
  HttpClient stranger("127.0.0.1", mtls_->process->port(), kTimeout);
  ASSERT_TRUE(stranger.UseTls({pki_->ca_cert, other->client_cert, other->client_key, true}).ok());
  EXPECT_EQ(stranger.Post("/rerank", kRerank).status, 0);

  auto with = Client(*mtls_, true, /*client_cert=*/true);
  const ClientResponse served = with->Post("/rerank", kRerank);
  EXPECT_EQ(served.status, 200) << served.error << served.body;
  EXPECT_EQ(Scores(served).size(), 2u);
}

#ifdef TIDE_HAVE_GRPC
std::shared_ptr<grpc::Channel> TlsChannel(int port, const tide::testing::TestPki& pki, bool client_cert) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ReadAll(pki.ca_cert);
  if (client_cert) {
    options.pem_cert_chain = ReadAll(pki.client_cert);
    options.pem_private_key = ReadAll(pki.client_key);
  }
  return grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::SslCredentials(options));
}

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

// The CN of the server certificate a new gRPC connection sees; "" when the call failed.
std::string GrpcPeerCommonName(int port, const tide::testing::TestPki& pki) {
  auto stub = inference::GRPCInferenceService::NewStub(TlsChannel(port, pki, false));
  inference::ServerReadyResponse ready;
  auto ctx = Ctx();
  if (!stub->ServerReady(ctx.get(), {}, &ready).ok()) return "";
  const auto names = ctx->auth_context()->FindPropertyValues("x509_common_name");
  return names.empty() ? "" : std::string(names.front().data(), names.front().size());
}

TEST_F(ServeTlsTest, GrpcOverTls) {
  auto channel = TlsChannel(tls_->grpc_port, *pki_, false);
  auto kserve = inference::GRPCInferenceService::NewStub(channel);
  inference::ServerReadyResponse ready;
  auto ctx = Ctx();
  const grpc::Status status = kserve->ServerReady(ctx.get(), {}, &ready);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(ready.ready());

  auto rerank = tei::v1::Rerank::NewStub(channel);
  tei::v1::RerankRequest request;
  request.set_query("panda");
  request.add_texts("a giant panda eats bamboo");
  request.add_texts("a city at night");
  tei::v1::RerankResponse response;
  auto ctx2 = Ctx();
  const grpc::Status reranked = rerank->Rerank(ctx2.get(), request, &response);
  ASSERT_TRUE(reranked.ok()) << reranked.error_message();
  EXPECT_EQ(response.ranks_size(), 2);

  // A plaintext gRPC client gets no answer from the TLS port.
  auto plain = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(tls_->grpc_port), grpc::InsecureChannelCredentials()));
  auto ctx3 = std::make_unique<grpc::ClientContext>();
  ctx3->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  EXPECT_FALSE(plain->ServerReady(ctx3.get(), {}, &ready).ok());
}

TEST_F(ServeTlsTest, GrpcMutualTls) {
  inference::ServerReadyResponse ready;
  auto without = inference::GRPCInferenceService::NewStub(TlsChannel(mtls_->grpc_port, *pki_, false));
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  EXPECT_FALSE(without->ServerReady(ctx.get(), {}, &ready).ok());
  auto with = inference::GRPCInferenceService::NewStub(TlsChannel(mtls_->grpc_port, *pki_, true));
  auto ctx2 = Ctx();
  const grpc::Status status = with->ServerReady(ctx2.get(), {}, &ready);
  EXPECT_TRUE(status.ok()) << status.error_message();
}
#endif

// tide bench over HTTPS (keep-alive and a connection per request) and gRPC over TLS.
TEST_F(ServeTlsTest, TideBenchSpeaksTls) {
  auto model = ExportedTinyBert();
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string tokenizer = (*model / "tokenizer.json").string();
  struct Case {
    std::string name;
    std::vector<std::string> flags;
  };
  const std::string https = "https://127.0.0.1:" + std::to_string(tls_->process->port());
  std::vector<Case> cases = {
      {"https", {"--url", https}},
      {"https-close", {"--url", https, "--connection-close"}},
      {"https-mtls", {"--url", "https://127.0.0.1:" + std::to_string(mtls_->process->port()), "--tls-cert-file",
                      pki_->client_cert, "--tls-key-file", pki_->client_key}},
  };
#ifdef TIDE_HAVE_GRPC
  cases.push_back({"grpcs", {"--protocol", "grpc", "--url", "grpcs://127.0.0.1:" + std::to_string(tls_->grpc_port)}});
#endif
  for (const Case& c : cases) {
    const std::string json = (dir_->path() / (c.name + ".json")).string();
    std::vector<std::string> argv = {TideBinary().string(), "bench", "--tls-ca-file", pki_->ca_cert, "--tokenizer",
                                     tokenizer, "--documents", "2", "--concurrency", "2", "--warmup", "200ms",
                                     "--duration", "1s", "--max-doc-tokens", "32", "--json", json};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    auto run = RunCommand(argv);
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(run->exit_code, 0) << c.name << "\n" << run->output;
    const nlohmann::json report = ParseJson(ReadAll(json));
    ASSERT_TRUE(report.contains("runs")) << c.name << " " << ReadAll(json);
    const auto& result = report["runs"][0];
    EXPECT_EQ(result["error_count"], 0) << c.name << " " << result["errors"].dump();
    EXPECT_GT(result["completed"].get<int>(), 0) << c.name;
  }
  // Without the CA the server is not trusted: every request fails.
  const std::string json = (dir_->path() / "untrusted.json").string();
  auto run = RunCommand({TideBinary().string(), "bench", "--url", https, "--tokenizer", tokenizer, "--concurrency", "1",
                         "--warmup", "0s", "--duration", "500ms", "--json", json});
  ASSERT_TRUE(run.ok()) << run.status();
  const nlohmann::json report = ParseJson(ReadAll(json));
  if (report.contains("runs")) {
    EXPECT_EQ(report["runs"][0]["completed"], 0) << report.dump();
    EXPECT_THAT(report["runs"][0]["errors"].dump(), HasSubstr("tls:"));
  } else {
    EXPECT_NE(run->exit_code, 0) << run->output;
  }
}

// Last in the suite: it replaces the certificate of tls_.
TEST_F(ServeTlsTest, SighupReloadsTheCertificateWithoutDroppingConnections) {
  ServerProcess& server = *tls_->process;
  auto kept = Client(*tls_, true);
  ASSERT_EQ(kept->Post("/rerank", kRerank).status, 200);
  EXPECT_THAT(kept->PeerCertificate(), HasSubstr("serial=1001"));

  // Renew: a new pair written over the served files, then SIGHUP.
  ASSERT_TRUE(tide::testing::IssueServerCert(*pki_, CertFile().string(), KeyFile().string(), 1002, "tide renewed").ok());
  ASSERT_TRUE(server.Signal(SIGHUP).ok());
  ASSERT_TRUE(WaitForLog(server, "reloaded the TLS certificate: subject=/CN=tide renewed")) << server.Diagnostics();

  // The connection opened before the reload keeps working, with its certificate.
  const ClientResponse on_kept = kept->Post("/rerank", kRerank);
  EXPECT_EQ(on_kept.status, 200) << on_kept.error;
  EXPECT_THAT(kept->PeerCertificate(), HasSubstr("serial=1001"));
  // A new connection sees the new one (HTTP and admin listener at once).
  auto fresh = Client(*tls_, true);
  EXPECT_EQ(fresh->Post("/rerank", kRerank).status, 200);
  EXPECT_THAT(fresh->PeerCertificate(), HasSubstr("serial=1002"));
  EXPECT_THAT(fresh->PeerCertificate(), HasSubstr("CN=tide renewed"));
  auto admin = Client(*tls_, true, false, static_cast<uint16_t>(tls_->admin_port));
  EXPECT_EQ(admin->Get("/v2/health/live").status, 200);
  EXPECT_THAT(admin->PeerCertificate(), HasSubstr("serial=1002"));
#ifdef TIDE_HAVE_GRPC
  // gRPC's provider picks the copy up within a second or two: poll new connections.
  std::string grpc_cn;
  WaitFor([&] { return (grpc_cn = GrpcPeerCommonName(tls_->grpc_port, *pki_)) == "tide renewed"; },
          std::chrono::seconds(20));
  EXPECT_EQ(grpc_cn, "tide renewed");
#endif

  // A broken renewal: a certificate whose key was not replaced with it. Logged, the renewed
  // pair keeps serving.
  ASSERT_TRUE(tide::testing::IssueServerCert(*pki_, CertFile().string(), (dir_->path() / "lost.key").string(), 1003,
                                             "tide broken")
                  .ok());
  ASSERT_TRUE(server.Signal(SIGHUP).ok());
  ASSERT_TRUE(WaitForLog(server, "keeping the current TLS certificate")) << server.Diagnostics();
  EXPECT_THAT(Log(server), HasSubstr("does not match the certificate"));
  auto after = Client(*tls_, true);
  EXPECT_EQ(after->Post("/rerank", kRerank).status, 200);
  EXPECT_THAT(after->PeerCertificate(), HasSubstr("serial=1002"));
  EXPECT_EQ(kept->Post("/rerank", kRerank).status, 200);
#ifdef TIDE_HAVE_GRPC
  EXPECT_EQ(GrpcPeerCommonName(tls_->grpc_port, *pki_), "tide renewed");
#endif
}

// Bad TLS flags stop the start with a message naming the problem, exit code 1, before any model
// loads.
TEST_F(ServeTlsTest, BadFlagsRefuseToStart) {
  const std::string missing = (dir_->path() / "missing.crt").string();
  const struct {
    std::vector<std::string> flags;
    std::string message;
  } cases[] = {
      {{"--tls-cert-file", missing, "--tls-key-file", pki_->server_key}, "cannot read --tls-cert-file " + missing},
      {{"--tls-cert-file", pki_->server_cert, "--tls-key-file", pki_->client_key}, "does not match the certificate"},
      {{"--tls-cert-file", pki_->server_cert, "--tls-key-file", pki_->server_key, "--tls-client-ca-file", missing},
       "cannot read --tls-client-ca-file"},
      {{"--tls-cert-file", pki_->server_cert, "--tls-key-file", pki_->server_key, "--tls-client-ca-file",
        pki_->server_key},
       "no PEM certificate"},
      {{"--tls-cert-file", pki_->server_cert}, "give both or neither"},
      {{"--tls-client-ca-file", pki_->ca_cert}, "needs --tls-cert-file"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {TideBinary().string(), "serve", "--model-repository", Repository().string(),
                                     "--port", "0", "--grpc-port", "0"};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    auto run = RunCommand(argv);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->exit_code, 1) << c.message << "\n" << run->output;
    EXPECT_THAT(run->output, HasSubstr(c.message));
    EXPECT_THAT(run->output, Not(HasSubstr("listening on")));
  }
}

}  // namespace
}  // namespace tide::blackbox
