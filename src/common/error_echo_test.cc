#include "common/error_echo.h"

#include <string>

#include <gtest/gtest.h>

namespace tide {
namespace {

TEST(EscapeForLogTest, PlainTextIsKeptAsItIs) {
  EXPECT_EQ(EscapeForLog("minilm-l6"), "minilm-l6");
  EXPECT_EQ(EscapeForLog("bge-reranker_v2.1 (int8)"), "bge-reranker_v2.1 (int8)");
  EXPECT_EQ(EscapeForLog("caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x90\xbc"), "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x90\xbc");
  EXPECT_EQ(EscapeForLog(""), "");
}

TEST(EscapeForLogTest, LineBreaksControlsAndQuotesAreEscaped) {
  // A forged second log line and an ANSI sequence that would clear the terminal.
  EXPECT_EQ(EscapeForLog("m\n[2026-01-01 00:00:00.000] [info] model x loaded"),
            "m\\n[2026-01-01 00:00:00.000] [info] model x loaded");
  EXPECT_EQ(EscapeForLog("a\rb\tc"), "a\\rb\\tc");
  EXPECT_EQ(EscapeForLog("\x1b[2J\x1b[31mred"), "\\x1b[2J\\x1b[31mred");
  EXPECT_EQ(EscapeForLog(std::string("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(EscapeForLog("del\x7f"), "del\\x7f");
  EXPECT_EQ(EscapeForLog("say \"hi\" \\ bye"), "say \\\"hi\\\" \\\\ bye");
  const std::string escaped = EscapeForLog("\n\r\x01\x1f\x7f");
  for (char c : escaped) {
    EXPECT_GE(static_cast<unsigned char>(c), 0x20) << escaped;
    EXPECT_LT(static_cast<unsigned char>(c), 0x7f) << escaped;
  }
}

TEST(EscapeForLogTest, BytesThatAreNotUtf8AreEscapedOneByOne) {
  EXPECT_EQ(EscapeForLog("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(EscapeForLog("a\x80z"), "a\\x80z");                  // a stray continuation byte
  EXPECT_EQ(EscapeForLog("\xc0\xaf"), "\\xc0\\xaf");              // overlong '/'
  EXPECT_EQ(EscapeForLog("\xed\xa0\x80"), "\\xed\\xa0\\x80");     // a UTF-16 surrogate
  EXPECT_EQ(EscapeForLog("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(EscapeForLog("\xe4\xb8"), "\\xe4\\xb8");              // cut short at the end
  EXPECT_EQ(EscapeForLog("\xe4\xb8z"), "\\xe4\\xb8z");
}

TEST(EscapeForLogTest, InvisibleUnicodeControlsAreEscaped) {
  EXPECT_EQ(EscapeForLog("a\xc2\x85z"), "a\\u0085z");             // NEL (C1)
  EXPECT_EQ(EscapeForLog("a\xc2\x9b" "2Jz"), "a\\u009b2Jz");       // CSI (C1): an 8-bit escape sequence
  EXPECT_EQ(EscapeForLog("a\xe2\x80\xa8z"), "a\\u2028z");         // LINE SEPARATOR
  EXPECT_EQ(EscapeForLog("a\xe2\x80\xa9z"), "a\\u2029z");         // PARAGRAPH SEPARATOR
  EXPECT_EQ(EscapeForLog("a\xe2\x80\xaez"), "a\\u202ez");         // RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(EscapeForLog("a\xe2\x81\xa6z"), "a\\u2066z");         // LEFT-TO-RIGHT ISOLATE
  EXPECT_EQ(EscapeForLog("\xc2\xa0"), "\xc2\xa0");                 // NBSP is text
}

TEST(EscapeForLogTest, LengthIsBoundedAtACharacterBoundary) {
  const std::string long_name(10000, 'x');
  const std::string escaped = EscapeForLog(long_name);
  EXPECT_EQ(escaped, std::string(kMaxLoggedBytes, 'x') + std::string(kTruncatedMarker));
  EXPECT_EQ(EscapeForLog("abcdef", 4), "abcd" + std::string(kTruncatedMarker));
  // "ab" then a 3-byte character across the limit: the character is dropped whole.
  EXPECT_EQ(EscapeForLog("ab\xe4\xb8\xad", 4), "ab" + std::string(kTruncatedMarker));
  // Escapes do not count against the limit of input bytes, and the output stays bounded.
  const std::string controls(10000, '\x1b');
  EXPECT_EQ(EscapeForLog(controls).size(), kMaxLoggedBytes * 4 + kTruncatedMarker.size());
  // A run of stray continuation bytes at the limit is walked back one character at most (3 bytes),
  // not to nothing.
  EXPECT_EQ(EscapeForLog(std::string(10, '\x80'), 4), "\\x80" + std::string(kTruncatedMarker));
  EXPECT_EQ(EscapeForLog(std::string(1000, '\x80'), 100).size(), 97 * 4 + kTruncatedMarker.size());
}

}  // namespace
}  // namespace tide
