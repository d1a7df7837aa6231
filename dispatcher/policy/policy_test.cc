// The resource policies on simulated jobs and recorded metric traces: each rule's decisions
// are deterministic and as expected, Granary's reach the oracle in ≤ 3 decisions, and the
// published baselines take one decision per worker.
#include <functional>
#include <string>
#include <vector>

#include "dispatcher/policy/autoscaler.h"
#include "dispatcher/policy/placement.h"
#include "dispatcher/policy/simulated_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

struct Trajectory {
  std::vector<std::pair<int32_t, int32_t>> steps;  // (remote, local) after each decision
  int32_t remote = 0;
  int32_t local = 0;
};

// Observes `job` at the current placement `periods` times, applying every decision.
template <typename Policy>
Trajectory Drive(Policy& policy, const SimulatedJob& job, int32_t remote, int32_t local,
                 int periods = 40) {
  Trajectory run{{}, remote, local};
  for (int i = 0; i < periods; ++i) {
    const std::optional<ScalingDecision> d = policy.Observe(job.Measure(run.remote, run.local));
    if (!d.has_value()) continue;
    run.remote = d->remote_workers;
    run.local = d->local_workers;
    run.steps.emplace_back(run.remote, run.local);
    EXPECT_FALSE(d->reason.empty());
  }
  return run;
}

// The oracle over static configurations (true batch times).
PlacementChoice Oracle(const SimulatedJob& job, int32_t max_remote, int32_t max_local,
                       const PlacementOptions& options = {}) {
  return CheapestNearBest(
      [&](int32_t remote, int32_t local) { return job.Measure(remote, local).batch_s(); },
      max_remote, max_local, options);
}

// Preprocessing-bound: the trainer takes 100 batches/s, a worker makes 15.
const SimulatedJob kPreprocessingBound{.step_s = 0.01, .remote_rate = 15, .local_rate = 15};
// Trainer-bound: it takes 10 batches/s; one worker is plenty.
const SimulatedJob kTrainerBound{.step_s = 0.1, .remote_rate = 15, .local_rate = 15};

TEST(CachewAutoscalerTest, AddsOneWorkerPerDecisionThenUndoesTheOneThatDidNotPay) {
  CachewAutoscaler cachew({.recheck_every = 1000});
  const Trajectory run = Drive(cachew, kPreprocessingBound, 1, 0);
  using P = std::pair<int32_t, int32_t>;
  EXPECT_THAT(run.steps, ::testing::ElementsAre(P{2, 0}, P{3, 0}, P{4, 0}, P{5, 0}, P{6, 0},
                                                P{7, 0}, P{8, 0}, P{7, 0}, P{6, 0}, P{7, 0}));
  EXPECT_EQ(run.remote, Oracle(kPreprocessingBound, 16, 0).remote);
}

TEST(CachewAutoscalerTest, ATrainerBoundJobProbesAndStaysAtOne) {
  CachewAutoscaler cachew({.recheck_every = 1000});
  const Trajectory run = Drive(cachew, kTrainerBound, 1, 0);
  using P = std::pair<int32_t, int32_t>;
  EXPECT_THAT(run.steps, ::testing::ElementsAre(P{2, 0}, P{1, 0}));
  EXPECT_EQ(run.remote, 1);
}

TEST(CachewAutoscalerTest, ReChecksPeriodically) {
  CachewAutoscaler cachew({.recheck_every = 5});
  const Trajectory run = Drive(cachew, kTrainerBound, 1, 0, /*periods=*/12);
  // Probe and undo, five stable periods, probe and undo again.
  EXPECT_EQ(run.steps.size(), 4u);
  EXPECT_EQ(run.remote, 1);
}

// Issue 17's target: within 5% of the oracle's cost at ≤ 1.05× its batch time.
void ExpectNearOracle(const SimulatedJob& job, int32_t remote, int32_t local, int32_t max_remote,
                      int32_t max_local) {
  const PlacementChoice oracle = Oracle(job, max_remote, max_local);
  const double batch_s = job.Measure(remote, local).batch_s();
  EXPECT_LE(CostPerBatch(batch_s, remote, Prices{}), 1.05 * oracle.cost_per_batch)
      << "step " << job.step_s << " rate " << job.remote_rate << ": " << remote << "+" << local
      << " workers, oracle " << oracle.remote << "+" << oracle.local;
  EXPECT_LE(batch_s, 1.05 * oracle.batch_s);
}

TEST(ModelAutoscalerTest, JumpsNearTheOracleInOneDecision) {
  for (const SimulatedJob& job :
       {kPreprocessingBound, kTrainerBound, SimulatedJob{.step_s = 0.02, .remote_rate = 7}}) {
    ModelAutoscaler model;
    const Trajectory run = Drive(model, job, 1, 0);
    EXPECT_LE(run.steps.size(), 1u);
    ExpectNearOracle(job, run.remote, 0, 16, 0);
  }
  ModelAutoscaler model;
  EXPECT_EQ(Drive(model, kPreprocessingBound, 1, 0).remote, 7);  // the oracle exactly
}

TEST(ModelAutoscalerTest, CorrectsByOneOnARecordedTrace) {
  // Recorded: at 7 workers the trainer still waited (the workers shared cores and made fewer
  // batches than measured alone); at 8 it did not.
  ModelAutoscaler model;
  JobMetrics m{.remote_workers = 1, .wait_s = 0.057, .step_s = 0.01, .remote_worker_rate = 15};
  auto d = model.Observe(m);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->remote_workers, 7);
  m = {.remote_workers = 7, .wait_s = 0.0015, .step_s = 0.01, .remote_worker_rate = 13};
  d = model.Observe(m);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->remote_workers, 8);
  EXPECT_THAT(d->reason, ::testing::HasSubstr("still waits 13%"));
  m = {.remote_workers = 8, .wait_s = 0, .step_s = 0.01, .remote_worker_rate = 13};
  EXPECT_FALSE(model.Observe(m).has_value()) << "7 x 13 < 100 x 1.05: keep 8";
  // Unmeasured rates decide nothing.
  ModelAutoscaler fresh;
  EXPECT_FALSE(fresh.Observe({.remote_workers = 1, .wait_s = 1}).has_value());
}

TEST(PolicyDeterminismTest, TheSameTraceGivesTheSameDecisions) {
  const auto decisions = [](auto policy) {
    std::vector<std::string> out;
    for (int32_t w : {1, 2, 3, 4, 3, 5, 8, 8, 2, 1}) {
      const auto d = policy.Observe(kPreprocessingBound.Measure(w, 0));
      out.push_back(d.has_value() ? d->reason : "-");
    }
    return out;
  };
  EXPECT_EQ(decisions(CachewAutoscaler()), decisions(CachewAutoscaler()));
  EXPECT_EQ(decisions(ModelAutoscaler()), decisions(ModelAutoscaler()));
  EXPECT_EQ(decisions(PecanPlacement()), decisions(PecanPlacement()));
  EXPECT_EQ(decisions(ModelPlacement()), decisions(ModelPlacement()));
}

// A trainer host whose spare cores make 15 batches/s per local worker, each slowing the
// trainer's step 4%.
const SimulatedJob kLocalHelps{
    .step_s = 0.01, .remote_rate = 15, .local_rate = 15, .slowdown_per_local = 0.04};

TEST(ModelPlacementTest, ProbesLocalWorkersThenJumpsToTheOracle) {
  ModelPlacement model;
  const Trajectory run = Drive(model, kLocalHelps, 0, 0);
  const PlacementChoice oracle = Oracle(kLocalHelps, 8, 2);
  using P = std::pair<int32_t, int32_t>;
  // The probe: 7 workers' worth if local ones slowed nothing, both local; then the oracle.
  EXPECT_THAT(run.steps, ::testing::ElementsAre(P{5, 2}, P{oracle.remote, oracle.local}));
  EXPECT_EQ(oracle.local, 1);  // a second local worker would slow the trainer past 5%
  // Where a local worker costs the trainer too much, none stays.
  ModelPlacement strict({.slowdown_limit = 0.02});
  const Trajectory none = Drive(strict, kLocalHelps, 0, 0);
  EXPECT_EQ(none.local, 0);
  EXPECT_LE(none.steps.size(), 3u);
  ExpectNearOracle(kLocalHelps, none.remote, none.local, 8, 0);
}

TEST(ModelPlacementTest, AFedTrainerStillTradesRemoteWorkersForFreeLocalOnes) {
  ModelPlacement model;
  const Trajectory run = Drive(model, kTrainerBound, 1, 0);
  using P = std::pair<int32_t, int32_t>;
  EXPECT_THAT(run.steps, ::testing::ElementsAre(P{0, 1}));
  const PlacementChoice oracle = Oracle(kTrainerBound, 8, 2);
  EXPECT_EQ(oracle.remote, 0);
  EXPECT_EQ(run.local, oracle.local);
}

TEST(ModelPlacementTest, AveragesTheSlowdownOverItsMeasurePeriods) {
  // Recorded: a base step of 10 ms; with two local workers one period measured 11.5 ms (CPU
  // contention on the trainer's host), the next 10.1 ms. Their average, 10.8 ms, is a 4%
  // slowdown per local worker, so 4 remote + 1 local feed the trainer in 10.4 ms; the first
  // period alone (7.5% each) would have left no local worker within 5% of the best time.
  ModelPlacement model;
  JobMetrics m{.remote_workers = 1, .wait_s = 0.04, .step_s = 0.01, .remote_worker_rate = 20};
  std::optional<ScalingDecision> d = model.Observe(m);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->remote_workers, 3);
  EXPECT_EQ(d->local_workers, 2);
  m = {.remote_workers = 3,
       .local_workers = 2,
       .wait_s = 0,
       .step_s = 0.0115,
       .remote_worker_rate = 20,
       .local_worker_rate = 20};
  EXPECT_FALSE(model.Observe(m).has_value()) << "one period is not a measurement";
  m.step_s = 0.0101;
  d = model.Observe(m);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->remote_workers, 4) << d->reason;
  EXPECT_EQ(d->local_workers, 1) << d->reason;
  EXPECT_THAT(d->reason, ::testing::HasSubstr("4.0% slowdown each"));
}

TEST(PecanPlacementTest, LocalWorkersFirstThenRemoteOnePerDecision) {
  PecanPlacement pecan({.recheck_every = 1000});
  const Trajectory run = Drive(pecan, kLocalHelps, 0, 0);
  using P = std::pair<int32_t, int32_t>;
  // Two local workers (8% slowdown < 10%), then remote ones while they pay, the last undone.
  EXPECT_THAT(run.steps,
              ::testing::ElementsAre(P{0, 1}, P{0, 2}, P{1, 2}, P{2, 2}, P{3, 2}, P{4, 2}));
  // Fed within the 5% wait tolerance, but 11.1 ms per batch where 10.4 was reachable: the
  // incremental rule keeps both local workers (each within the 10% slowdown) and stops there.
  EXPECT_NEAR(kLocalHelps.Measure(4, 2).batch_s(), 1.0 / 90, 1e-12);
}

TEST(PecanPlacementTest, ALocalWorkerSlowingTheTrainerTooMuchIsRemoved) {
  PecanPlacement pecan({.recheck_every = 1000});
  const SimulatedJob heavy{
      .step_s = 0.01, .remote_rate = 15, .local_rate = 15, .slowdown_per_local = 0.2};
  const Trajectory run = Drive(pecan, heavy, 0, 0);
  ASSERT_GE(run.steps.size(), 2u);
  EXPECT_EQ(run.steps[0], (std::pair<int32_t, int32_t>{0, 1}));
  EXPECT_EQ(run.steps[1], (std::pair<int32_t, int32_t>{0, 0}));
  EXPECT_EQ(run.local, 0);
  EXPECT_GT(run.remote, 0);
}

TEST(PlacementCostTest, TheOracleWeighsTrainerTimeAgainstWorkerPrices) {
  // Trainer-bound: extra workers only cost; one is cheapest at the best time.
  EXPECT_EQ(Oracle(kTrainerBound, 8, 0).remote, 1);
  // Preprocessing-bound: the trainer's price buys enough workers to feed it.
  const PlacementChoice fed = Oracle(kPreprocessingBound, 8, 0);
  EXPECT_EQ(fed.remote, 7);
  EXPECT_DOUBLE_EQ(fed.batch_s, 0.01);
  EXPECT_NEAR(CostPerBatch(3600, 2, Prices{}), 4.96 + 2 * 0.427, 1e-12);
}

}  // namespace
}  // namespace granary
