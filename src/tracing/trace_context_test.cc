#include "tracing/trace_context.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tide::tracing {
namespace {

constexpr char kTrace[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kSpan[] = "00f067aa0ba902b7";

TEST(TraceparentTest, ParsesVersion00) {
  const std::optional<SpanContext> context =
      ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  ASSERT_TRUE(context);
  EXPECT_EQ(ToHex(context->trace_id), kTrace);
  EXPECT_EQ(ToHex(context->span_id), kSpan);
  EXPECT_EQ(context->trace_flags, 0x01);
  EXPECT_TRUE(context->sampled());
  EXPECT_TRUE(context->remote);
  EXPECT_EQ(context->trace_state, "");
}

TEST(TraceparentTest, FormatWritesVersion00AndRoundTrips) {
  const std::string header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
  const std::optional<SpanContext> context = ParseTraceparent(header);
  ASSERT_TRUE(context);
  EXPECT_FALSE(context->sampled());
  EXPECT_EQ(FormatTraceparent(*context), header);
}

struct Case {
  std::string name;
  std::string header;
  bool valid;
  uint8_t flags = 0;
};

class TraceparentTable : public ::testing::TestWithParam<Case> {};

TEST_P(TraceparentTable, Parses) {
  const Case& c = GetParam();
  const std::optional<SpanContext> context = ParseTraceparent(c.header);
  EXPECT_EQ(context.has_value(), c.valid) << c.header;
  if (context && c.valid) {
    EXPECT_EQ(ToHex(context->trace_id), kTrace);
    EXPECT_EQ(ToHex(context->span_id), kSpan);
    EXPECT_EQ(context->trace_flags, c.flags);
  }
}

const std::string kT = kTrace;
const std::string kS = kSpan;

INSTANTIATE_TEST_SUITE_P(
    W3C, TraceparentTable,
    ::testing::Values(
        Case{"sampled", "00-" + kT + "-" + kS + "-01", true, 0x01},
        Case{"not_sampled", "00-" + kT + "-" + kS + "-00", true, 0x00},
        Case{"unknown_flags_cleared", "00-" + kT + "-" + kS + "-ff", true, 0x03},
        Case{"random_flag_kept", "00-" + kT + "-" + kS + "-03", true, 0x03},
        Case{"surrounding_ows", " \t00-" + kT + "-" + kS + "-01 ", true, 0x01},
        Case{"future_version_exact", "cc-" + kT + "-" + kS + "-01", true, 0x01},
        Case{"future_version_with_more_fields", "cc-" + kT + "-" + kS + "-01-what-the-future-holds", true, 0x01},
        Case{"future_version_no_dash_after_flags", "cc-" + kT + "-" + kS + "-01x", false},
        Case{"version_ff", "ff-" + kT + "-" + kS + "-01", false},
        Case{"version_00_with_more_fields", "00-" + kT + "-" + kS + "-01-extra", false},
        Case{"version_00_trailing_char", "00-" + kT + "-" + kS + "-01x", false},
        Case{"version_uppercase", "0A-" + kT + "-" + kS + "-01", false},
        Case{"version_not_hex", "0g-" + kT + "-" + kS + "-01", false},
        Case{"trace_id_uppercase", "00-4BF92F3577B34DA6A3CE929D0E0E4736-" + kS + "-01", false},
        Case{"span_id_uppercase", "00-" + kT + "-00F067AA0BA902B7-01", false},
        Case{"flags_uppercase", "00-" + kT + "-" + kS + "-0A", false},
        Case{"trace_id_all_zero", "00-00000000000000000000000000000000-" + kS + "-01", false},
        Case{"span_id_all_zero", "00-" + kT + "-0000000000000000-01", false},
        Case{"trace_id_short", "00-" + kT.substr(1) + "-" + kS + "-01", false},
        Case{"span_id_long", "00-" + kT + "-" + kS + "0-01", false},
        Case{"trace_id_not_hex", "00-4bf92f3577b34da6a3ce929d0e0e473z-" + kS + "-01", false},
        Case{"flags_not_hex", "00-" + kT + "-" + kS + "-0x", false},
        Case{"flags_one_digit", "00-" + kT + "-" + kS + "-1", false},
        Case{"wrong_separator", "00_" + kT + "_" + kS + "_01", false},
        Case{"missing_separator", "00" + kT + "-" + kS + "-01-", false},
        Case{"empty", "", false},
        Case{"garbage", "hello", false},
        Case{"short_future_version", "01-" + kT + "-" + kS, false}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(TracestateTest, ValidListsAreCanonicalised) {
  EXPECT_EQ(ParseTracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"), "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  EXPECT_EQ(ParseTracestate(" rojo=1 ,\t congo=2 "), "rojo=1,congo=2");
  EXPECT_EQ(ParseTracestate("rojo=1,,congo=2,"), "rojo=1,congo=2");
  EXPECT_EQ(ParseTracestate(""), "");
  EXPECT_EQ(ParseTracestate("tenant1@vendor=x"), "tenant1@vendor=x");
  EXPECT_EQ(ParseTracestate("1tenant@v=x"), "1tenant@v=x");
  EXPECT_EQ(ParseTracestate("a_b-c*d/e=v a l!"), "a_b-c*d/e=v a l!");
}

TEST(TracestateTest, MalformedListsAreDiscardedWhole) {
  EXPECT_FALSE(ParseTracestate("rojo"));                 // no '='
  EXPECT_FALSE(ParseTracestate("Rojo=1"));               // uppercase key
  EXPECT_FALSE(ParseTracestate("1rojo=1"));              // simple key starts with a digit
  EXPECT_FALSE(ParseTracestate("rojo="));                // empty value
  EXPECT_EQ(ParseTracestate("rojo=a b "), "rojo=a b");   // a trailing space is OWS around the member
}

TEST(TracestateTest, ValueRules) {
  EXPECT_FALSE(ParseTracestate("rojo=a=b"));             // '=' in the value
  EXPECT_FALSE(ParseTracestate("rojo=caf\xc3\xa9"));     // non-ASCII
  EXPECT_FALSE(ParseTracestate(std::string("rojo=a\x01")));
  EXPECT_TRUE(ParseTracestate("rojo=" + std::string(256, 'x')));
  EXPECT_FALSE(ParseTracestate("rojo=" + std::string(257, 'x')));
}

TEST(TracestateTest, KeyRules) {
  EXPECT_TRUE(ParseTracestate("a" + std::string(255, 'b') + "=1"));
  EXPECT_FALSE(ParseTracestate("a" + std::string(256, 'b') + "=1"));
  EXPECT_TRUE(ParseTracestate(std::string(241, 't') + "@" + std::string(14, 's') + "=1"));
  EXPECT_FALSE(ParseTracestate(std::string(242, 't') + "@s=1"));
  EXPECT_FALSE(ParseTracestate("t@" + std::string(15, 's') + "=1"));
  EXPECT_FALSE(ParseTracestate("t@1s=1"));  // system id starts with a letter
  EXPECT_FALSE(ParseTracestate("@s=1"));
  EXPECT_FALSE(ParseTracestate("t@=1"));
  EXPECT_FALSE(ParseTracestate("t@s@x=1"));
  EXPECT_FALSE(ParseTracestate("ro.jo=1"));
}

TEST(TracestateTest, AtMost32MembersAndNoDuplicateKeys) {
  std::string list;
  for (int i = 0; i < 32; ++i) list += (i ? "," : "") + std::string("k") + std::to_string(i) + "=v";
  EXPECT_TRUE(ParseTracestate(list));
  EXPECT_FALSE(ParseTracestate(list + ",k32=v"));
  EXPECT_FALSE(ParseTracestate("rojo=1,congo=2,rojo=3"));
}

TEST(ExtractTest, CountsMalformedHeadersAndNeverFails) {
  TraceContextCounters counters;
  EXPECT_FALSE(Extract(std::nullopt, std::nullopt, &counters));
  EXPECT_FALSE(Extract(std::nullopt, std::string_view("rojo=1"), &counters));
  EXPECT_EQ(counters.malformed_traceparent.load(), 0u);

  EXPECT_FALSE(Extract(std::string_view("00-garbage"), std::string_view("rojo=1"), &counters));
  EXPECT_EQ(counters.malformed_traceparent.load(), 1u);
  EXPECT_EQ(counters.malformed_tracestate.load(), 0u);

  const std::string good = "00-" + kT + "-" + kS + "-01";
  std::optional<SpanContext> context = Extract(good, std::string_view("rojo=1,Bad=2"), &counters);
  ASSERT_TRUE(context);
  EXPECT_EQ(context->trace_state, "");
  EXPECT_EQ(counters.malformed_tracestate.load(), 1u);

  context = Extract(good, std::string_view("rojo=1, congo=2"), &counters);
  ASSERT_TRUE(context);
  EXPECT_EQ(context->trace_state, "rojo=1,congo=2");
  EXPECT_EQ(counters.malformed_traceparent.load(), 1u);
  EXPECT_EQ(counters.malformed_tracestate.load(), 1u);

  EXPECT_TRUE(Extract(good, std::nullopt, nullptr));
  EXPECT_FALSE(Extract(std::string_view("x"), std::nullopt, nullptr));
}

}  // namespace
}  // namespace tide::tracing
