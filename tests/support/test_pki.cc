#include "test_pki.h"

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace tide::testing {

absl::Status RunShell(const std::string& command) {
  FILE* pipe = ::popen(absl::StrCat("(", command, ") 2>&1").c_str(), "r");
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("popen: ", command));
  std::string output;
  char chunk[512];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), pipe)) > 0) output.append(chunk, n);
  const int rc = ::pclose(pipe);
  if (rc != 0) return absl::InternalError(absl::StrCat("`", command, "` failed (", rc, "): ", output));
  return absl::OkStatus();
}

namespace {

// A key and a certificate signed by the CA of `pki`, with the extensions in `ext` (openssl x509
// -extfile syntax).
absl::Status Issue(const TestPki& pki, const std::string& cert, const std::string& key, int serial,
                   const std::string& subject, const std::string& ext) {
  const std::string csr = cert + ".csr";
  const std::string ext_file = cert + ".ext";
  return RunShell(absl::StrCat(
      "set -e; cd '", pki.dir, "'; ",
      "openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout '", key, "' -out '", csr,
      "' -subj '", subject, "'; ",
      "printf '%s\\n' '", ext, "' > '", ext_file, "'; ",
      "openssl x509 -req -in '", csr, "' -CA ca.crt -CAkey ca.key -set_serial ", serial, " -days 2 -extfile '",
      ext_file, "' -out '", cert, "'; rm -f '", csr, "' '", ext_file, "'"));
}

}  // namespace

absl::StatusOr<TestPki> MakeTestPki(const std::string& dir) {
  TestPki pki;
  pki.dir = dir;
  pki.ca_cert = dir + "/ca.crt";
  pki.ca_key = dir + "/ca.key";
  pki.server_cert = dir + "/server.crt";
  pki.server_key = dir + "/server.key";
  pki.client_cert = dir + "/client.crt";
  pki.client_key = dir + "/client.key";
  absl::Status s = RunShell(absl::StrCat(
      "set -e; mkdir -p '", dir, "'; cd '", dir, "'; ",
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.crt "
      "-days 2 -subj '/CN=tide test CA' -addext basicConstraints=critical,CA:TRUE "
      "-addext keyUsage=critical,keyCertSign,cRLSign"));
  if (!s.ok()) return s;
  s = IssueServerCert(pki, pki.server_cert, pki.server_key, 1001, "tide test server");
  if (!s.ok()) return s;
  s = Issue(pki, pki.client_cert, pki.client_key, 2001, "/CN=tide test client", "extendedKeyUsage=clientAuth");
  if (!s.ok()) return s;
  return pki;
}

absl::Status IssueServerCert(const TestPki& pki, const std::string& cert_path, const std::string& key_path,
                             int serial, const std::string& common_name) {
  return Issue(pki, cert_path, key_path, serial, "/CN=" + common_name,
               "subjectAltName=IP:127.0.0.1,DNS:localhost");
}

}  // namespace tide::testing
