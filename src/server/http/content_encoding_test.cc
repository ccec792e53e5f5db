#include "server/http/content_encoding.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "deflate.h"

namespace tide::http {
namespace {

using ::testing::HasSubstr;

std::string Compress(const std::string& in, int window_bits) { return tide::testing::Deflate(in, window_bits); }

TEST(ContentEncodingTest, GzipZlibAndRawDeflateInflate) {
  const std::string plain = R"({"query":"q","texts":["a","b"]})";
  for (const auto& [coding, bits] : {std::pair{"gzip", 31}, {"GZip", 31}, {"x-gzip", 31}, {"deflate", 15}, {"deflate", -15}}) {
    std::string body = Compress(plain, bits);
    ASSERT_TRUE(DecodeContentEncoding(coding, &body, 1 << 20).ok()) << coding << " " << bits;
    EXPECT_EQ(body, plain) << coding;
  }
  std::string body = plain;
  EXPECT_TRUE(DecodeContentEncoding("identity", &body, 1).ok());
  EXPECT_EQ(body, plain);
}

TEST(ContentEncodingTest, AZipBombStopsAtTheLimitWith413) {
  const std::string huge(64 << 20, 'a');  // 64 MiB of one byte: ~64 KiB compressed
  std::string body = Compress(huge, 31);
  EXPECT_LT(body.size(), 1u << 20);
  const std::string sent = body;
  const absl::Status s = DecodeContentEncoding("gzip", &body, 1 << 20);
  EXPECT_EQ(KindOf(s), ErrorKind::kPayloadTooLarge) << s;
  EXPECT_EQ(body, sent);  // unchanged on error
}

TEST(ContentEncodingTest, CorruptTruncatedAndUnknownCodings) {
  std::string corrupt = "not gzip at all";
  EXPECT_EQ(KindOf(DecodeContentEncoding("gzip", &corrupt, 1 << 20)), ErrorKind::kMalformedRequest);
  std::string truncated = Compress(std::string(1000, 'x'), 31);
  truncated.resize(truncated.size() / 2);
  EXPECT_EQ(KindOf(DecodeContentEncoding("gzip", &truncated, 1 << 20)), ErrorKind::kMalformedRequest);
  std::string body = "x";
  const absl::Status br = DecodeContentEncoding("br", &body, 1 << 20);
  EXPECT_EQ(KindOf(br), ErrorKind::kUnimplemented);
  EXPECT_THAT(br.message(), HasSubstr("gzip, deflate and identity"));
  EXPECT_EQ(KindOf(DecodeContentEncoding("gzip, br", &body, 1 << 20)), ErrorKind::kUnimplemented);
}

}  // namespace
}  // namespace tide::http
