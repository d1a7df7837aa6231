// Tests of the Autotuner (autotuner.h) on simulated stages — a pipeline's output rate as a
// function of the knobs — driven on a simulated clock, and of tuned stages in a real pipeline.
#include "pipeline/core/autotuner.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/core/autotune_iterator.h"
#include "pipeline/pipeline.h"
#include "pipeline/pipeline_loader.h"
#include "pipeline/core/split_provider.h"
#include "pipeline/core/udf.h"

namespace granary {
namespace {

class FakeKnob : public Autotuner::Knob {
 public:
  explicit FakeKnob(int64_t bytes_per_unit = 0) : bytes_per_unit_(bytes_per_unit) {}
  void Set(int value) override {
    value_ = value;
    max_seen_ = std::max(max_seen_, value);
  }
  int64_t BytesPerUnit() const override { return bytes_per_unit_; }
  int value() const { return value_; }
  int max_seen() const { return max_seen_; }

 private:
  const int64_t bytes_per_unit_;
  int value_ = 0;
  int max_seen_ = 0;
};

// Feeds `tuner` outputs at the rate `rate()` gives for the knobs' current values, on a
// simulated clock, until it is done (or `max_outputs`).
void Drive(Autotuner& tuner, const std::function<double()>& rate, int max_outputs = 100000) {
  absl::Time now = absl::UnixEpoch();
  for (int i = 0; i < max_outputs && !tuner.done(); ++i) {
    now += absl::Seconds(1.0 / rate());
    tuner.OnOutput(now);
  }
}

TEST(AutotunerTest, ClimbsWhileTheRateGrowsAndTakesBackTheStepThatDidNot) {
  // A stage whose rate grows 10 per thread up to 35: 4 threads is the first at the ceiling.
  Autotuner tuner;
  FakeKnob threads;
  tuner.Register(&threads, Autotuner::KnobKind::kThreads, "stage");
  EXPECT_EQ(threads.value(), 1);
  Drive(tuner, [&] { return std::min(10.0 * threads.value(), 35.0); });
  EXPECT_TRUE(tuner.done());
  EXPECT_EQ(threads.value(), 4) << tuner.Describe();
  EXPECT_EQ(threads.max_seen(), 5) << "5 was tried and taken back";
  EXPECT_EQ(tuner.Describe(), "stage: 4 threads");
}

TEST(AutotunerTest, TunesEachKnobInTurnUntilAPassKeepsNothing) {
  // Two stages in a row: the pipeline runs at its slower stage's rate.
  Autotuner tuner;
  FakeKnob decode, augment;
  tuner.Register(&decode, Autotuner::KnobKind::kThreads, "decode");
  tuner.Register(&augment, Autotuner::KnobKind::kThreads, "augment");
  Drive(tuner, [&] { return std::min({12.0 * decode.value(), 30.0 * augment.value(), 60.0}); });
  EXPECT_TRUE(tuner.done());
  EXPECT_EQ(decode.value(), 5) << tuner.Describe();   // 60 reached at 5 x 12
  EXPECT_EQ(augment.value(), 2) << tuner.Describe();  // 60 reached at 2 x 30
  EXPECT_THAT(tuner.Values(), ::testing::ElementsAre(5, 2));
}

TEST(AutotunerTest, StaysWithinTheMaximumAndTheMemoryBudget) {
  // More threads always help here; the bounds stop the climb.
  Autotuner capped({.max_threads = 3});
  FakeKnob a;
  capped.Register(&a, Autotuner::KnobKind::kThreads, "a");
  Drive(capped, [&] { return 10.0 * a.value(); });
  EXPECT_EQ(a.max_seen(), 3);
  EXPECT_TRUE(capped.done());
  // 100 bytes per unit in a 250-byte budget: 2 units fit, a third does not.
  Autotuner budgeted({.memory_budget_bytes = 250});
  FakeKnob b(/*bytes_per_unit=*/100);
  budgeted.Register(&b, Autotuner::KnobKind::kBuffer, "b");
  Drive(budgeted, [&] { return 10.0 * b.value(); });
  EXPECT_EQ(b.max_seen(), 2);
  EXPECT_EQ(b.value(), 2);
}

TEST(AutotunerTest, TheNextTunerGoesOnWhereTheLastStopped) {
  // Epochs shorter than a tuning: each tuner sees 30 outputs, and the climb goes on across them.
  auto memo = std::make_shared<AutotuneMemo>();
  const auto rate = [](const FakeKnob& k) { return std::min(10.0 * k.value(), 35.0); };
  int tuners = 0;
  for (; tuners < 20 && !memo->Get().done; ++tuners) {
    Autotuner tuner({}, memo);
    FakeKnob a;
    tuner.Register(&a, Autotuner::KnobKind::kThreads, "a");
    Drive(tuner, [&] { return rate(a); }, /*max_outputs=*/30);
  }
  EXPECT_TRUE(memo->Get().done) << "after " << tuners << " tuners";
  EXPECT_THAT(memo->Get().values, ::testing::ElementsAre(4));
  // A tuner from a finished memo starts at its values and probes nothing.
  Autotuner next({}, memo);
  FakeKnob b;
  next.Register(&b, Autotuner::KnobKind::kThreads, "a");
  Drive(next, [&] { return rate(b); });
  EXPECT_EQ(b.value(), 4);
  EXPECT_EQ(b.max_seen(), 4);
  EXPECT_TRUE(next.done());
}

TEST(AutotunerTest, AFlatRateEndsTheTuningAtOne) {
  Autotuner tuner;
  FakeKnob a;
  tuner.Register(&a, Autotuner::KnobKind::kThreads, "a");
  Drive(tuner, [] { return 50.0; });
  EXPECT_TRUE(tuner.done());
  EXPECT_EQ(a.value(), 1);
}

// A real pipeline: a parallel_map given num_threads 0 whose UDF sleeps (wall time without CPU:
// more threads always help), then a tuned prefetch.
TEST(AutotunedPipelineTest, ASleepingStageGetsMoreThreadsAndTheOutputIsUnchanged) {
  const auto make = [](int threads, int buffer) {
    absl::StatusOr<PipelineDef> def = ParsePipelineJson(
        absl::StrCat(R"({"source": {"type": "range", "params": {"stop": 6000}}, "ops": [
          {"op": "parallel_map", "params": {"num_threads": )",
                     threads, R"(}, "udf": "simulate_cost", "udfParams": {"us_per_element": 1000}},
          {"op": "prefetch", "params": {"buffer_size": )",
                     buffer, R"(}}]})"),
        "test");
    EXPECT_TRUE(def.ok()) << def.status();
    absl::StatusOr<std::unique_ptr<Pipeline>> p =
        Pipeline::Create(*def, PipelineRegistries::WithBuiltins());
    EXPECT_TRUE(p.ok()) << p.status();
    return std::move(p).value();
  };
  const auto run = [](const Pipeline& pipeline, std::string* tuned) {
    auto splits = pipeline.EnumerateSplits(Env::Default());
    EXPECT_TRUE(splits.ok());
    auto it = pipeline.MakeIterator({}, std::make_unique<PlannedSplitProvider>(*splits));
    EXPECT_TRUE(it.ok()) << it.status();
    std::vector<int64_t> values;
    while (true) {
      Element e;
      bool end = false;
      EXPECT_TRUE((*it)->GetNext(&e, &end).ok());
      if (end) break;
      values.push_back(e.tensors[0].data<int64_t>()[0]);
    }
    if (tuned != nullptr) {
      auto* autotuned = dynamic_cast<AutotuneIterator*>(it->get());
      EXPECT_NE(autotuned, nullptr);
      if (autotuned != nullptr) *tuned = autotuned->tuner().Describe();
    }
    return values;
  };
  std::string tuned;
  const std::vector<int64_t> with_tuning = run(*make(0, 0), &tuned);
  EXPECT_EQ(with_tuning, run(*make(8, 2), nullptr));
  EXPECT_THAT(tuned, ::testing::ContainsRegex("parallel_map.*: [3-8] threads"));
  EXPECT_THAT(tuned, ::testing::HasSubstr("prefetch"));
}

}  // namespace
}  // namespace granary
