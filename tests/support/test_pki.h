// tide::testing::TestPki — a throwaway certificate authority for TLS tests, made with the openssl
// command-line tool (Debian's openssl package) in a folder the caller owns.
//
// Contract:
//  - MakeTestPki(dir) writes ca.crt/ca.key (CN "tide test CA"), server.crt/server.key (CN
//    "tide test server", SAN IP:127.0.0.1 and DNS:localhost, serial 1001) and client.crt/client.key
//    (CN "tide test client"), all EC P-256, valid for two days. INTERNAL with openssl's output when
//    a step fails.
//  - IssueServerCert writes another server certificate and key signed by the same CA, with `serial`
//    and CN `common_name`.
//  - Blocking (runs openssl as a child process); not thread-safe per folder.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tide::testing {

struct TestPki {
  std::string dir;
  std::string ca_cert, ca_key;
  std::string server_cert, server_key;
  std::string client_cert, client_key;
};

absl::StatusOr<TestPki> MakeTestPki(const std::string& dir);

absl::Status IssueServerCert(const TestPki& pki, const std::string& cert_path, const std::string& key_path,
                             int serial, const std::string& common_name);

// Runs `command` with /bin/sh; INTERNAL with its combined output when it exits non-zero.
absl::Status RunShell(const std::string& command);

}  // namespace tide::testing
