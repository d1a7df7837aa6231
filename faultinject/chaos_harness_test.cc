// The equal-shares verdict of `granary chaos` (CheckEqualShares) on hand-written digest lines:
// each way a remainder rule can be broken fails the epoch, naming it; a kept rule passes.
#include "faultinject/chaos_harness.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

DigestLine Share(int64_t steps, int64_t padding, int64_t remainder_dropped) {
  DigestLine line;
  line.steps = steps;
  line.padding = padding;
  line.remainder_dropped = remainder_dropped;
  return line;
}

TEST(CheckEqualSharesTest, EqualStepsKeepEachRule) {
  const EqualSharesVerdict pad = CheckEqualShares({Share(22, 1, 0), Share(22, 0, 0)}, "pad");
  EXPECT_THAT(pad.wrong, IsEmpty());
  EXPECT_EQ(pad.line, "; steps 22 = 22, padding 1 + 0, remainder dropped 0 + 0");
  const EqualSharesVerdict drop =
      CheckEqualShares({Share(21, 0, 0), Share(21, 0, 1), Share(21, 0, 2)}, "drop");
  EXPECT_THAT(drop.wrong, IsEmpty());
  EXPECT_EQ(drop.line, "; steps 21 = 21 = 21, padding 0 + 0 + 0, remainder dropped 0 + 1 + 2");
}

TEST(CheckEqualSharesTest, StepsThatDifferBreakPadAndDropButNotUneven) {
  for (const char* remainder : {"pad", "drop"}) {
    const EqualSharesVerdict verdict =
        CheckEqualShares({Share(22, 0, 0), Share(21, 0, 0)}, remainder);
    EXPECT_EQ(verdict.wrong, "steps 22, 21 by consumer differ") << remainder;
    EXPECT_THAT(verdict.line, HasSubstr("steps 22 / 21")) << remainder;
  }
  const EqualSharesVerdict uneven = CheckEqualShares({Share(22, 0, 0), Share(21, 0, 0)}, "uneven");
  EXPECT_THAT(uneven.wrong, IsEmpty());
  EXPECT_THAT(uneven.line, HasSubstr("steps 22 / 21"));
}

TEST(CheckEqualSharesTest, DroppingUnderPadOrPaddingUnderDropBreaksTheRule) {
  EXPECT_EQ(CheckEqualShares({Share(22, 0, 1), Share(22, 0, 0)}, "pad").wrong,
            "remainder dropped 1 + 0 under pad");
  EXPECT_EQ(CheckEqualShares({Share(22, 0, 0), Share(22, 2, 0)}, "drop").wrong,
            "padding 0 + 2 under drop");
}

}  // namespace
}  // namespace granary
