// Black-box tests of `tide serve`'s HTTP conformance, against the
// real binary over raw loopback sockets where a well-behaved client library would not send the
// bytes: request smuggling (Transfer-Encoding / Content-Length framing), absolute-form targets,
// HEAD, Host, huge timeouts, error bodies (error_type everywhere, Allow on 405, bounded echo of
// client names) and which endpoints the API key covers. One server:
//   --api-key secret --max-header-bytes 262144 (room for a 100 KB model name in a path)
//   --max-body-bytes 1048576 --header-read-timeout-ms 1000
//   m   tiny-bert
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "blackbox_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_client.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using tide::testing::ClientResponse;
using tide::testing::HeaderList;
using tide::testing::HttpClient;
using tide::testing::RawReadResult;

const HeaderList kAuth = {{"Authorization", "Bearer secret"}};
constexpr std::chrono::milliseconds kCloseWait{10000};  // a bound for hangs, not a timing check

class ServeHttpConformanceTest : public SharedServerSuite<ServeHttpConformanceTest> {
 protected:
  static void SetUpTestSuite() {
    StartSharedServer(
        [](const fs::path& repository) {
          return AddTinyBert(repository, "m",
                             "backend: \"onnxruntime\"\nmax_batch_size: 8\n"
                             "parameters { key: \"max_sequence_length\" value { string_value: \"64\" } }\n");
        },
        {"--api-key", "secret", "--max-header-bytes", "262144", "--max-body-bytes", "1048576",
         "--header-read-timeout-ms", "1000", "--log-level", "warn"});
  }

  // Sends `bytes` on a fresh connection and reads until the server closes it.
  static RawReadResult SendAndReadAll(const std::string& bytes) {
    auto client = NewClient();
    EXPECT_TRUE(client->SendRaw(bytes).ok());
    return client->ReadUntilClosed(kCloseWait);
  }

  static int CountResponses(const std::string& bytes) {
    int n = 0;
    const std::string_view mark = "\r\nServer: tide\r\n";  // every response has it, once
    for (size_t at = bytes.find(mark); at != std::string::npos; at = bytes.find(mark, at + 1)) ++n;
    return n;
  }

  // The JSON body of the single response in `bytes`.
  static json BodyOf(const std::string& bytes) {
    const size_t end = bytes.find("\r\n\r\n");
    return end == std::string::npos ? json() : ParseJson(bytes.substr(end + 4));
  }

  static void ExpectError(const ClientResponse& r, int status, std::string_view error_type) {
    EXPECT_EQ(r.status, status) << r.error << " " << r.body;
    const json body = ParseJson(r.body);
    ASSERT_TRUE(body.is_object()) << r.body;
    EXPECT_TRUE(body["error"].is_string()) << r.body;
    EXPECT_EQ(body["error_type"], error_type) << r.body;
  }

  static std::string InferBody(const std::string& extra = "") {
    return absl::StrCat(R"({"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["q"]},)",
                        R"({"name": "text_pair", "shape": [1], "datatype": "BYTES", "data": ["d"]}])", extra, "}");
  }
};

// ---- Item 4: request smuggling ---------------------------------------------------------------------

TEST_F(ServeHttpConformanceTest, TransferEncodingNotEndingInChunkedIs400AndTheBodyNeverRunsAsARequest) {
  // The body is a complete second request. Served as one (yesterday's behaviour: no body, the
  // connection kept open), a proxy that framed the message otherwise would have smuggled it.
  const std::string smuggled = "GET /v2/health/live HTTP/1.1\r\nHost: localhost\r\n\r\n";
  for (const std::string coding : {"xchunked", "chunked, identity", "\"chunked\"", "identity"}) {
    const RawReadResult r = SendAndReadAll(absl::StrCat("POST /v1/rerank HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: ",
                                                        coding, "\r\nAuthorization: Bearer secret\r\n\r\n", smuggled));
    EXPECT_TRUE(r.closed) << coding;
    EXPECT_THAT(r.bytes, StartsWith("HTTP/1.1 400 ")) << coding;
    EXPECT_EQ(CountResponses(r.bytes), 1) << coding << ":\n" << r.bytes;
    EXPECT_THAT(r.bytes, HasSubstr("Connection: close\r\n")) << coding;
    EXPECT_EQ(BodyOf(r.bytes)["error_type"], "validation") << r.bytes;
  }
}

TEST_F(ServeHttpConformanceTest, UnsupportedTransferCodingIs501AndCloses) {
  const RawReadResult r = SendAndReadAll(
      "POST /tokenize HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
      "5\r\nhello\r\n0\r\n\r\nGET /v2/health/live HTTP/1.1\r\nHost: localhost\r\n\r\n");
  EXPECT_TRUE(r.closed);
  EXPECT_THAT(r.bytes, StartsWith("HTTP/1.1 501 "));
  EXPECT_EQ(CountResponses(r.bytes), 1) << r.bytes;
  EXPECT_EQ(BodyOf(r.bytes)["error_type"], "unimplemented") << r.bytes;
}

TEST_F(ServeHttpConformanceTest, ContentLengthWithTransferEncodingOrTwiceIs400AndCloses) {
  const std::string next = "GET /v2/health/live HTTP/1.1\r\nHost: localhost\r\n\r\n";
  for (const std::string headers :
       {"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
        "Transfer-Encoding: identity\r\nContent-Length: 5\r\n", "Content-Length: 5\r\nContent-Length: 5\r\n",
        "Content-Length: 5\r\nContent-Length: 6\r\n"}) {
    const RawReadResult r =
        SendAndReadAll(absl::StrCat("POST /tokenize HTTP/1.1\r\nHost: localhost\r\n", headers, "\r\n0\r\n\r\n", next));
    EXPECT_TRUE(r.closed) << headers;
    EXPECT_THAT(r.bytes, StartsWith("HTTP/1.1 400 ")) << headers;
    EXPECT_EQ(CountResponses(r.bytes), 1) << headers << ":\n" << r.bytes;
  }
}

// ---- Item 7: huge timeouts ---------------------------------------------------------------------------

TEST_F(ServeHttpConformanceTest, HugeTimeoutsAreClampedNotAnInstant504) {
  auto client = NewClient();
  HeaderList headers = kAuth;
  headers.emplace_back("x-timeout-ms", "9223372036854775807");
  const ClientResponse rerank = client->Post("/rerank", R"({"query": "q", "texts": ["a", "b"]})", headers);
  EXPECT_EQ(rerank.status, 200) << rerank.body;
  const ClientResponse infer = client->Post("/v2/models/m/infer", InferBody(R"(, "parameters": {"timeout": 9223372036854775807})"), kAuth);
  EXPECT_EQ(infer.status, 200) << infer.body;
  const ClientResponse negative = client->Post("/v2/models/m/infer", InferBody(R"(, "parameters": {"timeout": -1})"), kAuth);
  ExpectError(negative, 422, "validation");
  // One rule for the header and the parameter: out of range is 422, not an integer is 400.
  headers.back().second = "-1";
  ExpectError(client->Post("/rerank", R"({"query": "q", "texts": ["a"]})", headers), 422, "validation");
  headers.back().second = "0";
  ExpectError(client->Post("/rerank", R"({"query": "q", "texts": ["a"]})", headers), 422, "validation");
  headers.back().second = "1.5";
  ExpectError(client->Post("/rerank", R"({"query": "q", "texts": ["a"]})", headers), 400, "validation");
  const ClientResponse zero = client->Post("/v2/models/m/infer", InferBody(R"(, "parameters": {"timeout": 0})"), kAuth);
  ExpectError(zero, 422, "validation");
  // Every answer a model produced names the version that served it.
  EXPECT_EQ(rerank.header("x-tide-model-version"), "1");
  EXPECT_EQ(infer.header("x-tide-model-version"), "1");
}

// ---- Item 8: absolute-form, HEAD, Host -----------------------------------------------------------

TEST_F(ServeHttpConformanceTest, AbsoluteFormTargetIsServed) {
  auto client = NewClient();
  ASSERT_TRUE(client
                  ->SendRaw(absl::StrCat("GET http://127.0.0.1:", server().port(),
                                         "/v2/health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
                  .ok());
  const ClientResponse live = client->ReadResponse();
  EXPECT_EQ(live.status, 200) << live.body;
  EXPECT_EQ(ParseJson(live.body)["live"], true);
  ASSERT_TRUE(client
                  ->SendRaw(absl::StrCat("GET http://127.0.0.1:", server().port(),
                                         "/v2/models/m/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer secret\r\n\r\n"))
                  .ok());
  EXPECT_EQ(client->ReadResponse().status, 200);
}

TEST_F(ServeHttpConformanceTest, HeadAnswersWhereverGetDoesWithGetsHeadersAndNoBody) {
  for (const std::string path : {"/v2/health/live", "/v2/health/ready", "/health", "/v2", "/v2/models/m/ready",
                                 "/v2/models/m", "/v2/models/m/stats", "/no/such/path"}) {
    auto client = NewClient();
    const ClientResponse get = client->Get(path, kAuth);
    const RawReadResult head = SendAndReadAll(
        absl::StrCat("HEAD ", path, " HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer secret\r\nConnection: close\r\n\r\n"));
    ASSERT_TRUE(head.closed) << path;
    EXPECT_THAT(head.bytes, StartsWith(absl::StrCat("HTTP/1.1 ", get.status, " "))) << path << ":\n" << head.bytes;
    // The body GET would send is described, not sent (stats may change between the two: compare
    // the length only where the body is fixed).
    EXPECT_THAT(head.bytes, HasSubstr("Content-Length: ")) << path;
    EXPECT_EQ(head.bytes.substr(head.bytes.size() - 4), "\r\n\r\n") << path << ": HEAD response carries a body";
    if (path != "/v2/models/m/stats" && path != "/no/such/path") {  // the 404 names the method
      EXPECT_THAT(head.bytes, HasSubstr(absl::StrCat("Content-Length: ", get.body.size(), "\r\n"))) << path;
    }
  }
  // No GET route: 405, and Allow names what is allowed.
  const RawReadResult rerank = SendAndReadAll("HEAD /rerank HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(rerank.bytes, StartsWith("HTTP/1.1 405 "));
  EXPECT_THAT(rerank.bytes, HasSubstr("Allow: POST\r\n"));
}

TEST_F(ServeHttpConformanceTest, Http11WithoutHostOrWithTwoIs400AndCloses) {
  for (const std::string headers : {"", "Host: a\r\nHost: b\r\n"}) {
    const RawReadResult r = SendAndReadAll(
        absl::StrCat("GET /v2/health/live HTTP/1.1\r\n", headers, "\r\nGET /v2/health/live HTTP/1.1\r\nHost: a\r\n\r\n"));
    EXPECT_TRUE(r.closed) << headers;
    EXPECT_THAT(r.bytes, StartsWith("HTTP/1.1 400 ")) << headers;
    EXPECT_EQ(CountResponses(r.bytes), 1) << headers << ":\n" << r.bytes;
    EXPECT_EQ(BodyOf(r.bytes)["error_type"], "validation");
  }
  // HTTP/1.0 needs none.
  const RawReadResult old = SendAndReadAll("GET /v2/health/live HTTP/1.0\r\n\r\n");
  EXPECT_THAT(old.bytes, StartsWith("HTTP/1.0 200 "));
}

// ---- Item 9: error bodies ------------------------------------------------------------------------

TEST_F(ServeHttpConformanceTest, EveryHttpLayerErrorCarriesErrorType) {
  auto client = NewClient();
  ExpectError(client->Get("/no/such/path"), 404, "not_found");
  const ClientResponse wrong_method = client->Get("/rerank");
  ExpectError(wrong_method, 405, "validation");
  EXPECT_EQ(wrong_method.header("allow"), "POST");
  const ClientResponse delete_model = client->Send("DELETE", "/v2/models/m", "", kAuth);
  ExpectError(delete_model, 405, "validation");
  EXPECT_EQ(delete_model.header("allow"), "GET, HEAD");

  const RawReadResult malformed = SendAndReadAll("GET / HTTP/1.1\r\nBad Header Line\r\n\r\n");
  EXPECT_THAT(malformed.bytes, StartsWith("HTTP/1.1 400 "));
  EXPECT_EQ(BodyOf(malformed.bytes)["error_type"], "validation") << malformed.bytes;

  const RawReadResult too_large = SendAndReadAll("POST /tokenize HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n");
  EXPECT_THAT(too_large.bytes, StartsWith("HTTP/1.1 413 "));
  EXPECT_EQ(BodyOf(too_large.bytes)["error_type"], "validation") << too_large.bytes;

  const RawReadResult big_header =
      SendAndReadAll(absl::StrCat("GET / HTTP/1.1\r\nHost: t\r\nX-Big: ", std::string(300 * 1024, 'x'), "\r\n\r\n"));
  EXPECT_THAT(big_header.bytes, StartsWith("HTTP/1.1 431 "));
  EXPECT_EQ(BodyOf(big_header.bytes)["error_type"], "validation") << big_header.bytes;

  const RawReadResult slow = SendAndReadAll("GET /v2/health/live HTTP/1.1\r\nHost: t\r\n");  // never finishes
  EXPECT_THAT(slow.bytes, StartsWith("HTTP/1.1 408 "));
  EXPECT_EQ(BodyOf(slow.bytes)["error_type"], "timeout") << slow.bytes;
}

TEST_F(ServeHttpConformanceTest, ClientNamesAreEchoedAsABoundedPrefix) {
  const std::string name(90 * 1024, 'n');  // under max_text_chars (100000), which caps a JSON field
  auto client = NewClient();
  for (const ClientResponse& r : {client->Get("/v2/models/" + name + "/ready"),
                                  client->Get("/v2/models/" + name + "/stats", kAuth),
                                  client->Post("/v2/models/" + name + "/infer", InferBody(), kAuth),
                                  client->Post("/v1/rerank", json{{"model", name}, {"query", "q"}, {"documents", {"d"}}}.dump(), kAuth),
                                  client->Get("/" + name), client->Send("PUT", "/v2/models/" + name, "", kAuth)}) {
    EXPECT_TRUE(r.status == 404 || r.status == 405) << r.status << " " << r.body.substr(0, 200);
    EXPECT_LT(r.body.size(), 1024u) << r.body.substr(0, 200);
    EXPECT_THAT(r.body, HasSubstr("...(truncated)"));
    EXPECT_TRUE(ParseJson(r.body)["error_type"].is_string()) << r.body.substr(0, 200);
  }
}

TEST_F(ServeHttpConformanceTest, ApiKeyCoversModelMetadataAndStatsButNotProbes) {
  auto client = NewClient();
  // Open: liveness/readiness probes, server metadata, Prometheus, and model readiness (KServe's
  // per-model probe).
  for (const std::string path : {"/health", "/v2/health/live", "/v2/health/ready", "/v2", "/metrics",
                                 "/v2/models/m/ready", "/v2/models/m/versions/1/ready"}) {
    EXPECT_EQ(client->Get(path).status, 200) << path;
    EXPECT_EQ(client->Get(path, kAuth).status, 200) << path;
  }
  // Keyed: model metadata and statistics, like inference.
  for (const std::string path : {"/v2/models/m", "/v2/models/m/versions/1", "/v2/models/m/stats",
                                 "/v2/models/m/versions/1/stats"}) {
    const ClientResponse none = client->Get(path);
    ExpectError(none, 401, "unauthorized");
    EXPECT_EQ(none.header("www-authenticate"), "Bearer") << path;
    ExpectError(client->Get(path, {{"Authorization", "Bearer wrong"}}), 401, "unauthorized");
    EXPECT_EQ(client->Get(path, kAuth).status, 200) << path;
  }
  const std::vector<std::pair<std::string, std::string>> inference = {
      {"/rerank", R"({"query": "q", "texts": ["a"]})"},
      {"/v1/rerank", R"({"query": "q", "documents": ["a"]})"},
      {"/tokenize", R"({"inputs": "x"})"},
      {"/v2/models/m/infer", InferBody()},
      {"/v2/models/m/versions/1/infer", InferBody()}};
  for (const auto& [path, body] : inference) {
    ExpectError(client->Post(path, body), 401, "unauthorized");
    EXPECT_EQ(client->Post(path, body, kAuth).status, 200) << path;
  }
}

}  // namespace
}  // namespace tide::blackbox
