#include "guard/api_keys.h"

#include <string>

#include "gtest/gtest.h"
#include "guard/access.h"

namespace tide::guard {
namespace {

constexpr char kFile[] = R"(# tenants
alpha-key-1 name=alpha requests_per_second=5 pairs_per_second=80 max_concurrent=2
beta-key-2  name=beta   # unlimited

  gamma-key-3 name=g.3 requests_per_second=0.5
)";

TEST(ApiKeys, ParsesTenantsAndFindsThemByBearerToken) {
  FakeClock clock;
  auto keys = ApiKeys::Parse(kFile, "keys.txt", &clock);
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ((*keys)->size(), 3u);
  EXPECT_EQ((*keys)->names(), (std::vector<std::string>{"alpha", "beta", "g.3"}));
  auto alpha = (*keys)->Find("Bearer alpha-key-1");
  ASSERT_NE(alpha, nullptr);
  EXPECT_EQ(alpha->name(), "alpha");
  EXPECT_EQ(alpha->quota().requests_per_second, 5);
  EXPECT_EQ(alpha->quota().pairs_per_second, 80);
  EXPECT_EQ(alpha->quota().max_concurrent, 2);
  EXPECT_EQ((*keys)->Find("bearer   beta-key-2 ")->name(), "beta");
  EXPECT_EQ((*keys)->Find("Bearer gamma-key-3")->quota().requests_per_second, 0.5);
  EXPECT_EQ((*keys)->Find("Bearer alpha-key-"), nullptr);   // a prefix is no key
  EXPECT_EQ((*keys)->Find("Bearer alpha-key-12"), nullptr);
  EXPECT_EQ((*keys)->Find("Basic alpha-key-1"), nullptr);
  EXPECT_EQ((*keys)->Find(""), nullptr);
  // The same tenant (and so the same buckets) for every request of a key.
  EXPECT_EQ((*keys)->Find("Bearer alpha-key-1").get(), alpha.get());
}

TEST(ApiKeys, ErrorsNameTheLineAndNeverTheKey) {
  FakeClock clock;
  struct Case {
    const char* text;
    const char* expected;
  };
  for (const Case& c : std::vector<Case>{
           {"secret-1\n", "keys.txt:1: name=NAME is required"},
           {"\nsecret-1 name=a\nsecret-1 name=b\n", "keys.txt:3: a key is listed twice"},
           {"secret-1 name=a\nsecret-2 name=a\n", "keys.txt:2: name=a is used twice"},
           {"secret-1 name=a requests_per_second=-1\n", "keys.txt:1: requests_per_second must be a number >= 0"},
           {"secret-1 name=a pairs_per_second=fast\n", "keys.txt:1: pairs_per_second must be a number >= 0"},
           {"secret-1 name=a max_concurrent=1.5\n", "keys.txt:1: max_concurrent must be an integer >= 0"},
           {"secret-1 name=a colour=red\n", "keys.txt:1: unknown attribute 'colour'"},
           {"secret-1 name=a b\n", "keys.txt:1: expected attribute=value"},
           {"secret-1 name=a/b\n", "keys.txt:1: name may hold only"},
           {"# only comments\n\n", "keys.txt: no keys"},
       }) {
    auto keys = ApiKeys::Parse(c.text, "keys.txt", &clock);
    ASSERT_FALSE(keys.ok()) << c.text;
    EXPECT_EQ(keys.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(keys.status().message().find(c.expected), std::string_view::npos) << keys.status();
    EXPECT_EQ(keys.status().message().find("secret"), std::string_view::npos) << keys.status();
  }
}

TEST(ApiKeys, TheSingleKeyJoinsAsTenantDefault) {
  FakeClock clock;
  auto alone = ApiKeys::WithKey(nullptr, "k", "default", kRoleTenant, "--api-key", &clock);
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ((*alone)->Find("Bearer k")->name(), "default");
  auto file = ApiKeys::Parse(kFile, "keys.txt", &clock);
  ASSERT_TRUE(file.ok());
  auto both = ApiKeys::WithKey(*file, "k", "default", kRoleTenant, "--api-key", &clock);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ((*both)->size(), 4u);
  EXPECT_EQ((*both)->Find("Bearer alpha-key-1")->name(), "alpha");
  EXPECT_FALSE(ApiKeys::WithKey(*file, "beta-key-2", "default", kRoleTenant, "--api-key", &clock).ok());
}

TEST(ApiKeys, LoadReadsAFileAndNamesAMissingOne) {
  FakeClock clock;
  EXPECT_EQ(ApiKeys::Load("/nonexistent/keys.txt", &clock).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tide::guard
