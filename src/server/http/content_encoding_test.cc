#include "server/http/content_encoding.h"

#include <zlib.h>

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"

namespace tide::http {
namespace {

using ::testing::HasSubstr;

// zlib's deflate with `window_bits` (31: gzip, 15: zlib, -15: raw).
std::string Compress(const std::string& in, int window_bits) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, window_bits, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, in.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

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
