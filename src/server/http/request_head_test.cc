#include "server/http/request_head.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tide::http {
namespace {

using ::testing::HasSubstr;

struct HeadCase {
  std::string name;
  int version;
  std::vector<std::pair<std::string, std::string>> fields;
  std::optional<ErrorKind> refused;  // nullopt: served
  std::string message;               // a part of the refusal's message
};

std::optional<HeadError> Check(const HeadCase& c) {
  RequestHeadCheck check;
  for (const auto& [name, value] : c.fields) check.AddField(name, value);
  return check.Finish(c.version);
}

TEST(RequestHeadTest, FramingAndHostTable) {
  constexpr ErrorKind k400 = ErrorKind::kMalformedRequest;
  constexpr ErrorKind k501 = ErrorKind::kUnimplemented;
  const std::vector<HeadCase> cases = {
      {"plain GET", 11, {{"Host", "x"}}, std::nullopt, ""},
      {"content length", 11, {{"Host", "x"}, {"Content-Length", "5"}}, std::nullopt, ""},
      {"chunked", 11, {{"Host", "x"}, {"Transfer-Encoding", "chunked"}}, std::nullopt, ""},
      {"chunked any case, spaces", 11, {{"host", "x"}, {"TRANSFER-ENCODING", " Chunked\t"}}, std::nullopt, ""},
      {"HTTP/1.0 without Host", 10, {}, std::nullopt, ""},
      {"empty Host", 11, {{"Host", ""}}, std::nullopt, ""},
      {"host and port", 11, {{"Host", "127.0.0.1:8000"}}, std::nullopt, ""},
      {"IPv6 literal", 11, {{"Host", "[::1]:80"}}, std::nullopt, ""},
      {"name", 11, {{"Host", "tide.example"}}, std::nullopt, ""},
      {"unrelated headers", 11, {{"Host", "x"}, {"X-Hosts", "a, b"}, {"Content-Type", "a,b"}}, std::nullopt, ""},
      // Host (RFC 9112 §3.2)
      {"HTTP/1.1 without Host", 11, {}, k400, "HTTP/1.1 request without a Host header"},
      {"two Hosts", 11, {{"Host", "a"}, {"HOST", "b"}}, k400, "more than one Host header"},
      {"two Hosts on HTTP/1.0", 10, {{"Host", "a"}, {"Host", "b"}}, k400, "more than one Host header"},
      {"space in Host", 11, {{"Host", "a b"}}, k400, "invalid Host header 'a b'"},
      {"slash in Host", 11, {{"Host", "a/b"}}, k400, "invalid Host header"},
      // Content-Length (RFC 9112 §6.3)
      {"two Content-Lengths", 11, {{"Host", "x"}, {"Content-Length", "2"}, {"content-length", "2"}}, k400,
       "more than one Content-Length"},
      {"Content-Length list", 11, {{"Host", "x"}, {"Content-Length", "2, 2"}}, k400, "more than one Content-Length"},
      // Transfer-Encoding (RFC 9112 §6.1)
      {"TE and CL", 11, {{"Host", "x"}, {"Transfer-Encoding", "chunked"}, {"Content-Length", "2"}}, k400,
       "both Transfer-Encoding and Content-Length"},
      {"CL and TE", 11, {{"Host", "x"}, {"Content-Length", "2"}, {"Transfer-Encoding", "chunked"}}, k400,
       "both Transfer-Encoding and Content-Length"},
      {"CL and unsupported TE", 11, {{"Host", "x"}, {"Content-Length", "2"}, {"Transfer-Encoding", "gzip"}}, k400,
       "both Transfer-Encoding and Content-Length"},
      {"TE on HTTP/1.0", 10, {{"Transfer-Encoding", "chunked"}}, k400, "not allowed in an HTTP/1.0 request"},
      {"xchunked", 11, {{"Host", "x"}, {"Transfer-Encoding", "xchunked"}}, k400, "must end with chunked, got 'xchunked'"},
      {"chunked then identity", 11, {{"Host", "x"}, {"Transfer-Encoding", "chunked, identity"}}, k400,
       "got 'identity'"},
      {"quoted chunked", 11, {{"Host", "x"}, {"Transfer-Encoding", "\"chunked\""}}, k400, "must end with chunked"},
      {"identity", 11, {{"Host", "x"}, {"Transfer-Encoding", "identity"}}, k400, "must end with chunked"},
      {"chunked with a parameter", 11, {{"Host", "x"}, {"Transfer-Encoding", "chunked;x=1"}}, k400,
       "must end with chunked"},
      {"empty list", 11, {{"Host", "x"}, {"Transfer-Encoding", ","}}, k400, "must end with chunked, got ''"},
      {"chunked twice", 11, {{"Host", "x"}, {"Transfer-Encoding", "chunked, chunked"}}, k400, "applies chunked twice"},
      {"chunked twice over two fields", 11, {{"Host", "x"}, {"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "chunked"}},
       k400, "applies chunked twice"},
      {"gzip then chunked", 11, {{"Host", "x"}, {"Transfer-Encoding", "gzip, chunked"}}, k501,
       "transfer coding 'gzip' is not supported"},
      {"deflate,chunked", 11, {{"Host", "x"}, {"Transfer-Encoding", "deflate,chunked"}}, k501, "'deflate'"},
      {"gzip and chunked fields", 11, {{"Host", "x"}, {"Transfer-Encoding", "gzip"}, {"Transfer-Encoding", "chunked"}},
       k501, "send Transfer-Encoding: chunked alone"},
  };
  for (const HeadCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::optional<HeadError> refused = Check(c);
    if (!c.refused.has_value()) {
      EXPECT_FALSE(refused.has_value()) << refused->message;
      continue;
    }
    ASSERT_TRUE(refused.has_value());
    EXPECT_EQ(refused->kind, *c.refused);
    EXPECT_THAT(refused->message, HasSubstr(c.message));
  }
}

TEST(RequestHeadTest, FramingIsCheckedBeforeHost) {
  // Both wrong: the framing error is the one reported (it is what makes the body unreadable).
  const std::optional<HeadError> refused =
      CheckRequestHead(11, {{"Transfer-Encoding", "gzip, chunked"}, {"Host", "a"}, {"Host", "b"}});
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->kind, ErrorKind::kUnimplemented);
  EXPECT_FALSE(CheckRequestHead(11, {{"Host", "x"}}).has_value());
}

TEST(RequestHeadTest, AnEchoedValueIsBounded) {
  const std::string huge(10000, 'a');
  const std::optional<HeadError> refused = CheckRequestHead(11, {{"Host", "x"}, {"Transfer-Encoding", huge}});
  ASSERT_TRUE(refused.has_value());
  EXPECT_LT(refused->message.size(), 1000u);
}

TEST(OriginFormTest, Table) {
  const std::pair<std::string, std::string> cases[] = {
      {"/v1/rerank?x=1", "/v1/rerank?x=1"},
      {"/", "/"},
      {"*", "*"},
      {"http://127.0.0.1:8000/v2/health/live", "/v2/health/live"},
      {"HTTPS://tide.example/v1/rerank?x=1", "/v1/rerank?x=1"},
      {"http://tide.example", "/"},
      {"http://tide.example?q", "/?q"},
      {"http://", "/"},
      {"ftp://tide.example/x", "ftp://tide.example/x"},
      {"http:/x", "http:/x"},
  };
  for (const auto& [target, origin] : cases) EXPECT_EQ(OriginForm(target), origin) << target;
}

}  // namespace
}  // namespace tide::http
