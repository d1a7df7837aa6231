#include "faultinject/skewed_clock_env.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/manual_clock_env.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

class SkewedClockEnvTest : public ::testing::Test {
 protected:
  // Writes the control file; the clock sees it at its next reading 100 ms of base time on.
  void Control(const std::string& text) {
    ASSERT_TRUE(WriteStringToFile(Env::Default(), control_, text, /*sync=*/false).ok());
    base_.AdvanceMicros(100'000);
  }

  testing::ScopedTempDir dir_;
  const std::string control_ = dir_.Join("clock");
  ManualClockEnv base_{Env::Default(), 1'000'000};
};

TEST_F(SkewedClockEnvTest, WithoutAControlFileTheClockIsTheBase) {
  SkewedClockEnv env(&base_, control_);
  EXPECT_EQ(env.NowMicros(), 1'000'000u);
  base_.AdvanceMicros(250'000);
  EXPECT_EQ(env.NowMicros(), 1'250'000u);
}

TEST_F(SkewedClockEnvTest, RunsAtTheRateFromWhenItIsSeenWithoutSkipping) {
  SkewedClockEnv env(&base_, control_);
  Control("2");
  const uint64_t seen = env.NowMicros();  // 1.1 s: the rate applies from here
  EXPECT_EQ(seen, 1'100'000u);
  base_.AdvanceMicros(1'000'000);
  EXPECT_EQ(env.NowMicros(), seen + 2'000'000);

  Control("0.5");  // 2 s more at rate 2 up to the re-read (base +100 ms => +200 ms), then half
  const uint64_t slowed = env.NowMicros();
  EXPECT_EQ(slowed, seen + 2'200'000);
  base_.AdvanceMicros(1'000'000);
  EXPECT_EQ(env.NowMicros(), slowed + 500'000);
}

TEST_F(SkewedClockEnvTest, JumpsForwardByTheGrowthOfTheJumpTotalAndNeverBack) {
  SkewedClockEnv env(&base_, control_);
  Control("1 60");
  EXPECT_EQ(env.NowMicros(), 1'100'000u + 60'000'000);
  Control("1 90");
  EXPECT_EQ(env.NowMicros(), 1'200'000u + 90'000'000);
  Control("1 0");  // lower: no jump back
  EXPECT_EQ(env.NowMicros(), 1'300'000u + 90'000'000);
  Control("1 100");  // 10 s past the highest total so far
  EXPECT_EQ(env.NowMicros(), 1'400'000u + 100'000'000);
}

TEST_F(SkewedClockEnvTest, IsReadAtMostEvery100MillisecondsOfBaseTime) {
  SkewedClockEnv env(&base_, control_);
  EXPECT_EQ(env.NowMicros(), 1'000'000u);  // read (absent)
  ASSERT_TRUE(WriteStringToFile(Env::Default(), control_, "1 5", false).ok());
  base_.AdvanceMicros(99'999);
  EXPECT_EQ(env.NowMicros(), 1'099'999u);  // not re-read yet
  base_.AdvanceMicros(1);
  EXPECT_EQ(env.NowMicros(), 1'100'000u + 5'000'000);
}

TEST_F(SkewedClockEnvTest, AMalformedControlFileLeavesTheRate) {
  SkewedClockEnv env(&base_, control_);
  Control("2");
  const uint64_t seen = env.NowMicros();
  Control("fast");
  EXPECT_EQ(env.NowMicros(), seen + 200'000);  // still rate 2
}

TEST_F(SkewedClockEnvTest, SleepsTheSkewedDurationScaledToTheBase) {
  SkewedClockEnv env(&base_, control_);
  Control("4");
  const uint64_t before = base_.NowMicros();
  env.SleepForMicros(400'000);  // ManualClockEnv advances instead of sleeping
  EXPECT_EQ(base_.NowMicros() - before, 100'000u);
}

TEST(ParseClockSkewTest, ReadsRateAndJump) {
  absl::StatusOr<ClockSkew> skew = ParseClockSkew("1.5 30\n");
  ASSERT_TRUE(skew.ok()) << skew.status();
  EXPECT_EQ(skew->rate, 1.5);
  EXPECT_EQ(skew->jump_seconds, 30);
  skew = ParseClockSkew("0.5");
  ASSERT_TRUE(skew.ok()) << skew.status();
  EXPECT_EQ(skew->rate, 0.5);
  EXPECT_EQ(skew->jump_seconds, 0);
}

TEST(ParseClockSkewTest, NamesWhatIsWrong) {
  const struct {
    const char* text;
    const char* says;
  } cases[] = {
      {"", "not one or two fields"},
      {"1 2 3", "not one or two fields"},
      {"fast", "RATE is not a number"},
      {"0", "RATE must be > 0"},
      {"-2", "RATE must be > 0"},
      {"1 soon", "JUMP_SECONDS is not a number"},
      {"1 -5", "JUMP_SECONDS must be >= 0"},
      {"nan", "RATE is not a number"},
  };
  for (const auto& c : cases) {
    const absl::StatusOr<ClockSkew> skew = ParseClockSkew(c.text);
    ASSERT_FALSE(skew.ok()) << "'" << c.text << "'";
    EXPECT_EQ(skew.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(skew.status().message(), HasSubstr(c.says)) << c.text;
    EXPECT_THAT(skew.status().message(), HasSubstr(absl::StrCat("'", c.text, "'")));
  }
}

}  // namespace
}  // namespace granary
