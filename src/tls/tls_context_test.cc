#include "tls/tls_context.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <boost/asio/ssl/context.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_pki.h"

namespace tide::tls {
namespace {

using ::testing::HasSubstr;

class TlsContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = std::filesystem::temp_directory_path() / "tide-tls-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    auto pki = testing::MakeTestPki(dir_);
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *pki;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  ServerTlsFiles Files(bool mutual = false) const {
    return ServerTlsFiles{pki_.server_cert, pki_.server_key, mutual ? pki_.ca_cert : ""};
  }
  static void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

  std::string dir_;
  testing::TestPki pki_;
};

TEST_F(TlsContextTest, LoadsAMatchingPairAndDescribesTheCertificate) {
  auto context = ServerTlsContext::Create(Files(/*mutual=*/true));
  ASSERT_TRUE(context.ok()) << context.status();
  EXPECT_NE((*context)->current(), nullptr);
  EXPECT_THAT((*context)->description(), HasSubstr("CN=tide test server"));
  EXPECT_THAT((*context)->description(), HasSubstr("serial=03E9"));  // 1001
  EXPECT_TRUE((*context)->mutual());
  EXPECT_THAT((*context)->current_pem().cert_chain, HasSubstr("BEGIN CERTIFICATE"));
  EXPECT_THAT((*context)->current_pem().client_ca, HasSubstr("BEGIN CERTIFICATE"));
}

TEST_F(TlsContextTest, RefusesMissingFilesNamingTheFlag) {
  ServerTlsFiles files = Files();
  files.cert_file = dir_ + "/absent.crt";
  auto context = ServerTlsContext::Create(files);
  ASSERT_FALSE(context.ok());
  EXPECT_THAT(std::string(context.status().message()), HasSubstr("cannot read --tls-cert-file " + files.cert_file));
  EXPECT_THAT(std::string(context.status().message()), HasSubstr("No such file"));

  files = Files();
  files.key_file = dir_ + "/absent.key";
  EXPECT_THAT(std::string(ServerTlsContext::Create(files).status().message()), HasSubstr("cannot read --tls-key-file"));

  files = Files(/*mutual=*/true);
  files.client_ca_file = dir_ + "/absent-ca.crt";
  EXPECT_THAT(std::string(ServerTlsContext::Create(files).status().message()), HasSubstr("cannot read --tls-client-ca-file"));
}

TEST_F(TlsContextTest, RefusesAKeyThatDoesNotMatchTheCertificate) {
  ServerTlsFiles files = Files();
  files.key_file = pki_.client_key;
  auto context = ServerTlsContext::Create(files);
  ASSERT_FALSE(context.ok());
  EXPECT_EQ(context.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(context.status().message()), HasSubstr("does not match the certificate"));
}

TEST_F(TlsContextTest, RefusesFilesThatAreNotPem) {
  Write(dir_ + "/junk", "not a certificate\n");
  ServerTlsFiles files = Files();
  files.cert_file = dir_ + "/junk";
  EXPECT_THAT(std::string(ServerTlsContext::Create(files).status().message()), HasSubstr("not a PEM certificate chain"));
  files = Files();
  files.key_file = dir_ + "/junk";
  EXPECT_THAT(std::string(ServerTlsContext::Create(files).status().message()), HasSubstr("not a PEM private key"));
  files = Files(/*mutual=*/true);
  files.client_ca_file = dir_ + "/junk";
  EXPECT_THAT(std::string(ServerTlsContext::Create(files).status().message()), HasSubstr("no PEM certificate"));
}

TEST_F(TlsContextTest, FlagsGoTogether) {
  EXPECT_TRUE(ValidateServerTlsFlags({}).ok());
  EXPECT_TRUE(ValidateServerTlsFlags(Files(true)).ok());
  EXPECT_THAT(std::string(ValidateServerTlsFlags({"a.crt", "", ""}).message()), HasSubstr("give both or neither"));
  EXPECT_THAT(std::string(ValidateServerTlsFlags({"", "a.key", ""}).message()), HasSubstr("give both or neither"));
  EXPECT_THAT(std::string(ValidateServerTlsFlags({"", "", "ca.crt"}).message()), HasSubstr("needs --tls-cert-file"));
}

TEST_F(TlsContextTest, ReloadSwapsToTheNewPairAndKeepsTheOldOneOnError) {
  auto created = ServerTlsContext::Create(Files());
  ASSERT_TRUE(created.ok()) << created.status();
  std::shared_ptr<ServerTlsContext> context = *created;
  const auto first = context->current();

  ASSERT_TRUE(testing::IssueServerCert(pki_, pki_.server_cert, pki_.server_key, 1002, "tide renewed").ok());
  ASSERT_TRUE(context->Reload().ok());
  EXPECT_NE(context->current(), first);
  EXPECT_THAT(context->description(), HasSubstr("CN=tide renewed"));
  EXPECT_THAT(context->description(), HasSubstr("serial=03EA"));

  // A certificate whose key was not replaced with it: refused, the renewed pair stays.
  const auto renewed = context->current();
  ASSERT_TRUE(testing::IssueServerCert(pki_, pki_.server_cert, dir_ + "/other.key", 1003, "tide broken").ok());
  absl::Status reload = context->Reload();
  EXPECT_THAT(std::string(reload.message()), HasSubstr("does not match"));
  EXPECT_EQ(context->current(), renewed);
  EXPECT_THAT(context->description(), HasSubstr("CN=tide renewed"));
  // A truncated certificate file likewise.
  Write(pki_.server_cert, "-----BEGIN CERTIFICATE-----\nMIIB\n");
  EXPECT_FALSE(context->Reload().ok());
  EXPECT_EQ(context->current(), renewed);
}

TEST_F(TlsContextTest, ClientContextNeedsBothCertificateAndKey) {
  EXPECT_TRUE(MakeClientContext({pki_.ca_cert, "", "", true}).ok());
  EXPECT_TRUE(MakeClientContext({pki_.ca_cert, pki_.client_cert, pki_.client_key, true}).ok());
  EXPECT_FALSE(MakeClientContext({pki_.ca_cert, pki_.client_cert, "", true}).ok());
  EXPECT_THAT(MakeClientContext({pki_.ca_cert, pki_.client_cert, pki_.server_key, true}).status().message(),
              HasSubstr("does not match"));
  EXPECT_FALSE(MakeClientContext({dir_ + "/absent", "", "", true}).ok());
}

}  // namespace
}  // namespace tide::tls
