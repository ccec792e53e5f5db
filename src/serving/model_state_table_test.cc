// ModelStateTable: states by (name, version), the whole-model entry (no version), transitions that
// only move from the expected state (a retirement must not overwrite a reload's READY), ordering.
#include "serving/model_state_table.h"

#include "gtest/gtest.h"

namespace tide::serving {
namespace {

TEST(ModelStateTable, SetTransitionEraseAndSnapshotOrder) {
  ModelStateTable t;
  t.Set("m", 2, ModelState::kLoading);
  t.Set("m", 1, ModelState::kUnloading, "no longer chosen");
  t.Set("m", std::nullopt, ModelState::kUnavailable, "config.pbtxt:1:1: ...");
  t.Set("a", 1, ModelState::kReady);
  std::vector<ModelStateEntry> all = t.Snapshot();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].name, "a");
  EXPECT_EQ(all[1].version, std::nullopt);  // the whole-model entry first
  EXPECT_EQ(all[2].version, 1);
  EXPECT_EQ(all[3].version, 2);

  EXPECT_FALSE(t.Transition("m", 2, ModelState::kUnloading, ModelState::kUnavailable, "unloaded"));
  EXPECT_EQ(t.Get("m", 2)->state, ModelState::kLoading);
  EXPECT_TRUE(t.Transition("m", 1, ModelState::kUnloading, ModelState::kUnavailable, "unloaded"));
  EXPECT_EQ(t.Get("m", 1)->reason, "unloaded");
  EXPECT_FALSE(t.Transition("x", 1, ModelState::kReady, ModelState::kUnavailable));

  t.Erase("m", std::nullopt);
  EXPECT_FALSE(t.Get("m", std::nullopt).has_value());
  t.EraseModel("m");
  ASSERT_EQ(t.Snapshot().size(), 1u);
  EXPECT_EQ(t.Snapshot()[0].name, "a");
  EXPECT_EQ(ModelStateName(ModelState::kUnloading), "UNLOADING");
}

}  // namespace
}  // namespace tide::serving
