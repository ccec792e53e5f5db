#include "server/http/response_serializer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tide::http {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

Response Ok(std::string body = "ok") {
  Response response;
  response.body = std::move(body);
  return response;
}

Response WithStatus(int status, std::string body = "ok") {
  Response response = Ok(std::move(body));
  response.status = status;
  return response;
}

struct SerializeCase {
  std::string name;
  Response response;
  ResponseFraming framing;
  std::string wire;  // the exact bytes
};

TEST(ResponseSerializerTest, FramingTable) {
  const std::string head = "Server: tide\r\nContent-Type: application/json\r\n";
  Response plain = Ok();
  plain.content_type = "";
  Response extra = Ok();
  extra.headers = {{"X-A", "1"}, {"Retry-After", "1"}};
  const std::vector<SerializeCase> cases = {
      {"HTTP/1.1 keep-alive", Ok(), {11, true, false},
       "HTTP/1.1 200 OK\r\n" + head + "Content-Length: 2\r\n\r\nok"},
      {"HTTP/1.1 close", Ok(), {11, false, false},
       "HTTP/1.1 200 OK\r\n" + head + "Content-Length: 2\r\nConnection: close\r\n\r\nok"},
      {"HTTP/1.0 keep-alive", Ok(), {10, true, false},
       "HTTP/1.0 200 OK\r\n" + head + "Content-Length: 2\r\nConnection: keep-alive\r\n\r\nok"},
      {"HTTP/1.0 close", Ok(), {10, false, false}, "HTTP/1.0 200 OK\r\n" + head + "Content-Length: 2\r\n\r\nok"},
      {"HEAD: length of the body, no body", Ok("hello"), {11, true, true},
       "HTTP/1.1 200 OK\r\n" + head + "Content-Length: 5\r\n\r\n"},
      {"204: no length, no body", WithStatus(204), {11, true, false}, "HTTP/1.1 204 No Content\r\n" + head + "\r\n"},
      {"304: no length, no body", WithStatus(304), {11, true, false}, "HTTP/1.1 304 Not Modified\r\n" + head + "\r\n"},
      {"status without a reason", WithStatus(299), {11, true, false},
       "HTTP/1.1 299 Unknown\r\n" + head + "Content-Length: 2\r\n\r\nok"},
      {"error status", WithStatus(503, ""), {11, false, false},
       "HTTP/1.1 503 Service Unavailable\r\n" + head + "Content-Length: 0\r\nConnection: close\r\n\r\n"},
      {"no content type", plain, {11, true, false}, "HTTP/1.1 200 OK\r\nServer: tide\r\nContent-Length: 2\r\n\r\nok"},
      {"extra headers in order", extra, {11, true, false},
       "HTTP/1.1 200 OK\r\n" + head + "X-A: 1\r\nRetry-After: 1\r\nContent-Length: 2\r\n\r\nok"},
      {"HTTP/2 asked: answered as HTTP/1.1", Ok(), {20, true, false},
       "HTTP/1.1 200 OK\r\n" + head + "Content-Length: 2\r\n\r\nok"},
  };
  for (const SerializeCase& c : cases) {
    EXPECT_EQ(SerializeResponse(c.response, c.framing), c.wire) << c.name;
  }
}

TEST(ResponseSerializerTest, TheServerOwnsFramingHeaders) {
  Response response = Ok();
  response.status = 201;
  response.headers = {{"Content-Length", "999"}, {"connection", "close"}, {"Transfer-Encoding", "chunked"},
                      {"SERVER", "evil"},        {"Bad Name", "x"},      {"Bad:Name", "y"},
                      {"", "z"},                 {"X-Ok", "1"}};
  EXPECT_EQ(SerializeResponse(response, {}),
            "HTTP/1.1 201 Created\r\nServer: tide\r\nContent-Type: application/json\r\nX-Ok: 1\r\n"
            "Content-Length: 2\r\n\r\nok");
}

TEST(ResponseSerializerTest, ControlCharactersAreDroppedFromValues) {
  Response response = Ok();
  response.headers = {{"X-Injected", "a\r\nEvil: 1"}, {"X-Controls", std::string("a\x01" "b\0c\x7f\td\xa5", 9)}};
  response.content_type = "text/plain\x13";
  const std::string wire = SerializeResponse(response, {});
  EXPECT_THAT(wire, HasSubstr("\r\nX-Injected: aEvil: 1\r\n"));
  EXPECT_THAT(wire, HasSubstr(std::string("\r\nX-Controls: abc\td\xa5\r\n")));
  EXPECT_THAT(wire, HasSubstr("\r\nContent-Type: text/plain\r\n"));
  EXPECT_EQ(wire.find("\r\nEvil"), std::string::npos);
}

TEST(ResponseSerializerTest, AStatusOutside200To599IsAnswered500) {
  for (const int status : {0, 100, 101, 199, 600, -1}) {
    const std::string wire = SerializeResponse(WithStatus(status), {11, true, false});
    EXPECT_THAT(wire, StartsWith("HTTP/1.1 500 Internal Server Error\r\n")) << status;
    EXPECT_THAT(wire, HasSubstr("handler answered status " + std::to_string(status))) << status;
    EXPECT_THAT(wire, HasSubstr(R"("error_type":"backend")")) << status;
  }
  EXPECT_THAT(SerializeResponse(WithStatus(200), {}), StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(SerializeResponse(WithStatus(599), {}), StartsWith("HTTP/1.1 599 "));
}

TEST(ResponseSerializerTest, ContinueIsAnInterimResponse) {
  EXPECT_EQ(kContinueResponse, "HTTP/1.1 100 Continue\r\n\r\n");
}

}  // namespace
}  // namespace tide::http
