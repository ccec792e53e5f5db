// Black-box test of log hygiene against the real binary: a model name an admin
// request carries (percent-encoded in the repository API's URL) with a newline, ANSI escape bytes,
// a quote and a byte that is not UTF-8 reaches the server's log (spdlog on stdout; stderr checked
// too) as one line per request, escaped (common/error_echo.h EscapeForLog): it can neither forge a
// second log line nor drive the terminal of whoever reads the log.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "blackbox_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_client.h"

namespace tide::blackbox {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(ServeLogHygieneTest, ARepositoryRequestsHostileModelNameIsLoggedOnOneEscapedLine) {
  TempDir tmp;
  const fs::path repository = tmp.path() / "repo";
  ASSERT_TRUE(AddTinyBert(repository, "m", TinyBertConfig()).ok());
  auto server = StartTideServe(repository, {"--model-control-mode", "explicit", "--admin-api-key", "admin-secret",
                                            "--log-level", "info"});
  ASSERT_TRUE(server.ok()) << server.status();

  // evil<LF><ESC>[31m[info] FORGED line"<0xFF>
  const std::string encoded = "evil%0A%1B%5B31m%5Binfo%5D%20FORGED%20line%22%FF";
  const std::string escaped = R"(evil\n\x1b[31m[info] FORGED line\"\xff)";
  tide::testing::HttpClient client((*server)->host(), (*server)->port(), std::chrono::milliseconds(60000));
  const tide::testing::HeaderList admin = {{"Authorization", "Bearer admin-secret"}};
  const auto load = client.Post("/v2/repository/models/" + encoded + "/load", "{}", admin);
  EXPECT_EQ(load.status, 404) << load.body;
  const auto unload = client.Post("/v2/repository/models/" + encoded + "/unload", "{}", admin);
  EXPECT_EQ(unload.status, 404) << unload.body;
  ASSERT_TRUE((*server)->Stop().ok());  // every line written and flushed

  // tide's log (spdlog) is on stdout beside the "listening" line; stderr has the rest.
  const std::string log = (*server)->Stdout() + (*server)->Stderr();
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << "a raw escape byte reached the output:\n" << log;
  EXPECT_EQ(log.find('\xff'), std::string::npos) << "a byte that is not UTF-8 reached the output:\n" << log;
  std::vector<std::string> mentioning;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (line.find("FORGED") != absl::string_view::npos) mentioning.emplace_back(line);
  }
  ASSERT_EQ(mentioning.size(), 2u) << "one line per request, the name never splitting one:\n" << log;
  EXPECT_THAT(mentioning[0], HasSubstr(absl::StrCat("repository: load of model ", escaped, " requested: refused: ")));
  EXPECT_THAT(mentioning[1], HasSubstr(absl::StrCat("repository: unload of model ", escaped, " requested: refused: ")));
  for (const std::string& line : mentioning) {
    // A whole log line of its own: "2026-12-02T05:40:38.123 warning repository: ...".
    EXPECT_TRUE(!line.empty() && line[0] >= '0' && line[0] <= '9') << "not a log line of its own: " << line;
    EXPECT_THAT(line, HasSubstr(" warning repository: ")) << line;
    EXPECT_THAT(line, HasSubstr("is not in the model repository")) << line;
  }
}

}  // namespace
}  // namespace tide::blackbox
