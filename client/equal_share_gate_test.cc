#include "client/equal_share_gate.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using Action = EqualShareGate::Action;
using ::testing::HasSubstr;

OtherShares Others(Remainder remainder, int64_t min_at_least, int64_t max_at_least, bool final,
                   int32_t num_others = 1) {
  OtherShares others;
  others.set_remainder(remainder);
  others.set_num_others(num_others);
  others.set_min_at_least(min_at_least);
  others.set_max_at_least(max_at_least);
  others.set_final(final);
  return others;
}

TEST(EqualShareGateTest, WithoutNewsOfOthersNothingIsHeldBack) {
  const EqualShareGate gate;
  EXPECT_EQ(gate.Next(/*own_ready=*/true, /*own_done=*/false), Action::kDeliver);
  EXPECT_EQ(gate.Next(false, false), Action::kWait);
  EXPECT_EQ(gate.Next(false, true), Action::kEnd);
}

TEST(EqualShareGateTest, UnevenAndAloneAreNeverGated) {
  EqualShareGate uneven;
  uneven.Resume(5, 0, 0);
  uneven.Learn(Others(REMAINDER_UNEVEN, 0, 0, false));
  EXPECT_EQ(uneven.Next(true, false), Action::kDeliver);
  EXPECT_EQ(uneven.Next(false, true), Action::kEnd);
  EqualShareGate alone;
  alone.Resume(5, 0, 0);
  alone.Learn(Others(REMAINDER_DROP, 0, 0, true, /*num_others=*/0));
  EXPECT_EQ(alone.Next(true, false), Action::kDeliver);
}

// Three consumers: one final with 2, two more with surplus each waiting for the other. Each
// drops its surplus once it has delivered the final one's count, not when all are final.
TEST(EqualShareGateTest, DropDropsOnceOneOtherIsFinalWithNoMore) {
  EqualShareGate gate;
  OtherShares others = Others(REMAINDER_DROP, 2, 5, /*final=*/false, /*num_others=*/2);
  others.set_any_final(true);
  others.set_min_final(2);
  gate.Learn(others);
  EXPECT_EQ(gate.Next(true, false), Action::kDeliver);
  gate.Delivered();
  EXPECT_EQ(gate.Next(true, false), Action::kDeliver);
  gate.Delivered();
  EXPECT_EQ(gate.Next(true, false), Action::kDrop);
  // News without the final count (a restarted dispatcher) does not take it back.
  gate.Learn(Others(REMAINDER_DROP, 2, 5, false, 2));
  EXPECT_EQ(gate.Next(true, false), Action::kDrop);
}

TEST(EqualShareGateTest, DropDeliversOnlyBelowWhatEveryOtherHas) {
  EqualShareGate gate;
  gate.Learn(Others(REMAINDER_DROP, 2, 4, false));
  EXPECT_EQ(gate.Next(true, false), Action::kDeliver);
  gate.Delivered();
  EXPECT_EQ(gate.Next(true, false), Action::kDeliver);
  gate.Delivered();
  // 2 delivered, the others have at least 2 and are not final: wait.
  EXPECT_EQ(gate.Next(true, false), Action::kWait);
  gate.Learn(Others(REMAINDER_DROP, 3, 4, false));
  EXPECT_EQ(gate.Next(true, false), Action::kDeliver);
  gate.Delivered();
  // The others end with 3 at the fewest: the rest of this consumer's is dropped.
  gate.Learn(Others(REMAINDER_DROP, 3, 4, true));
  EXPECT_EQ(gate.Next(true, false), Action::kDrop);
  gate.Dropped();
  EXPECT_EQ(gate.Next(false, true), Action::kEnd);
  EXPECT_EQ(gate.delivered(), 3);
  EXPECT_EQ(gate.dropped(), 1);
}

TEST(EqualShareGateTest, DropEndsAConsumerWithFewerAtItsOwnEnd) {
  EqualShareGate gate;
  gate.Resume(2, 0, 0);
  gate.Learn(Others(REMAINDER_DROP, 5, 5, false));
  EXPECT_EQ(gate.Next(false, true), Action::kEnd);
}

TEST(EqualShareGateTest, AnOlderSmallerBoundChangesNothing) {
  EqualShareGate gate;
  gate.Resume(3, 0, 0);
  gate.Learn(Others(REMAINDER_DROP, 5, 6, true));
  // A restarted dispatcher counts again from less.
  gate.Learn(Others(REMAINDER_DROP, 1, 1, false));
  EXPECT_EQ(gate.Next(true, false), Action::kDeliver);
  EXPECT_THAT(gate.Describe(), HasSubstr("at least 5 to 6 (final)"));
}

// The reader learns of the others (its first heartbeat) before it resumes the saved counts: they
// must not forget what it learned, or a resumed consumer at its own end ends as if alone instead
// of padding (granary chaos --scenario equal_shares --seed 2 found it).
TEST(EqualShareGateTest, AResumedGateKeepsWhatItLearnedOfTheOthers) {
  EqualShareGate gate;
  gate.Learn(Others(REMAINDER_PAD, 22, 22, true));
  gate.Resume(21, 0, 0);
  EXPECT_EQ(gate.delivered(), 21);
  EXPECT_EQ(gate.Next(false, true), Action::kPad);
  gate.Padded();
  EXPECT_EQ(gate.Next(false, true), Action::kEnd);
  EXPECT_EQ(gate.padded(), 1);

  EqualShareGate dropping;
  dropping.Learn(Others(REMAINDER_DROP, 20, 21, true));
  dropping.Resume(20, 1, 0);
  EXPECT_EQ(dropping.dropped(), 1);
  EXPECT_EQ(dropping.Next(true, false), Action::kDrop);
}

TEST(EqualShareGateTest, PadDeliversItsOwnThenPadsUpToTheMost) {
  EqualShareGate gate;
  gate.Learn(Others(REMAINDER_PAD, 1, 3, false));
  EXPECT_EQ(gate.Next(true, false), Action::kDeliver);
  gate.Delivered();
  EXPECT_EQ(gate.Next(false, false), Action::kWait);
  // Its own are done at 1; another consumer has at least 3.
  EXPECT_EQ(gate.Next(false, true), Action::kPad);
  gate.Padded();
  EXPECT_EQ(gate.Next(false, true), Action::kPad);
  gate.Padded();
  EXPECT_EQ(gate.Next(false, true), Action::kWait);
  gate.Learn(Others(REMAINDER_PAD, 1, 4, true));
  EXPECT_EQ(gate.Next(false, true), Action::kPad);
  gate.Padded();
  EXPECT_EQ(gate.Next(false, true), Action::kEnd);
  EXPECT_EQ(gate.delivered() + gate.padded(), 4);
}

TEST(EqualShareGateTest, PadNeverPadsTheConsumerWithTheMost) {
  EqualShareGate gate;
  gate.Resume(6, 0, 0);
  gate.Learn(Others(REMAINDER_PAD, 2, 5, true));
  EXPECT_EQ(gate.Next(false, true), Action::kEnd);
  EXPECT_EQ(gate.padded(), 0);
}

TEST(EqualShareGateTest, AResumedGateGoesOnFromItsCounts) {
  EqualShareGate gate;
  gate.Resume(/*delivered=*/4, /*dropped=*/0, /*padded=*/1);
  gate.Learn(Others(REMAINDER_PAD, 6, 6, true));
  EXPECT_EQ(gate.Next(false, true), Action::kPad);
  gate.Padded();
  EXPECT_EQ(gate.Next(false, true), Action::kEnd);
}

}  // namespace
}  // namespace granary
