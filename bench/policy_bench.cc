// The resource policies against the oracle (issue 17), on simulated jobs: the policies of
// dispatcher/policy/ observe dispatcher/policy/simulated_job.h's metrics — a trainer step time,
// per-worker rates, the slowdown a local worker causes the trainer — period after period, and
// apply each decision. For three workload shapes (preprocessing-bound, in between,
// trainer-bound) the oracle is the cheapest static configuration (0–8 remote × 0–2 local
// workers) within 5% of the best batch time; each policy is reported by its final batch time
// and cost per batch (the trainer's and the remote workers' prices, Pecan's defaults), their
// ratios to the oracle's, and the decisions it took to converge. Worker counts over time go to
// line series (plotted) for the preprocessing-bound shape.
//
// What this does not measure yet: the policies acting on a real cluster's heartbeat metrics (the
// dispatcher does not run them yet; see bench/RESULTS.md).
//
//   bench/policy_bench [--json_dir D]
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_report.h"
#include "bench/policy_report.h"
#include "dispatcher/policy/autoscaler.h"
#include "dispatcher/policy/placement.h"
#include "dispatcher/policy/simulated_job.h"

namespace granary {
namespace {

constexpr int kPeriods = 40;
constexpr int32_t kMaxRemote = 8;
constexpr int32_t kMaxLocal = 2;

struct Shape {
  std::string name;
  SimulatedJob job;
};

struct Outcome {
  std::vector<int32_t> workers;  // remote + local after each period
  int decisions = 0;
  int32_t remote = 0, local = 0;
};

template <typename Policy>
Outcome Drive(Policy& policy, const SimulatedJob& job, int32_t remote, int32_t local) {
  Outcome out;
  out.remote = remote;
  out.local = local;
  for (int i = 0; i < kPeriods; ++i) {
    if (const auto d = policy.Observe(job.Measure(out.remote, out.local)); d.has_value()) {
      out.remote = d->remote_workers;
      out.local = d->local_workers;
      ++out.decisions;
    }
    out.workers.push_back(out.remote + out.local);
  }
  return out;
}

absl::Status Run() {
  const std::vector<Shape> shapes = {
      {"preprocessing-bound",
       {.step_s = 0.01, .remote_rate = 15, .local_rate = 15, .slowdown_per_local = 0.04}},
      {"in between",
       {.step_s = 0.025, .remote_rate = 12, .local_rate = 10, .slowdown_per_local = 0.03}},
      {"trainer-bound",
       {.step_s = 0.1, .remote_rate = 15, .local_rate = 15, .slowdown_per_local = 0.04}},
  };
  BenchReport report(
      "policy", "Resource policies vs the oracle on simulated jobs (cost per 1000 batches, $)", 1);
  const PlacementOptions options{
      .max_local = kMaxLocal, .max_remote = kMaxRemote, .recheck_every = 1000};
  for (const Shape& shape : shapes) {
    const auto true_batch_s = [&](int32_t remote, int32_t local) {
      return shape.job.Measure(remote, local).batch_s();
    };
    const auto add = [&](const std::string& policy, const Outcome& o, const PlacementChoice& oracle,
                         bool granary, bool plot) {
      const double batch_s = true_batch_s(o.remote, o.local);
      const PolicyOutcome outcome{.policy = policy,
                                  .remote = o.remote,
                                  .local = o.local,
                                  .batch_s = batch_s,
                                  .cost_per_batch = CostPerBatch(batch_s, o.remote, options.prices),
                                  .decisions = o.decisions};
      ReportPolicyOutcome(report, shape.name, outcome, oracle, granary);
      if (plot) {
        for (int i = 0; i < 12; ++i) {
          report.AddSeries(absl::StrCat(policy, " workers, period ", i), "workers",
                           {static_cast<double>(o.workers[i])}, BenchPoint{policy, double(i)});
        }
      }
      return outcome;
    };
    // Autoscaling: remote workers only, from 1.
    const PlacementChoice scale_oracle = CheapestNearBest(true_batch_s, kMaxRemote, 0, options);
    ReportOracle(report, shape.name, PolicyKind::kAutoscaling, scale_oracle);
    CachewAutoscaler cachew({.recheck_every = 1000, .max_workers = kMaxRemote});
    ModelAutoscaler model({.max_workers = kMaxRemote});
    const bool plot = shape.name == "preprocessing-bound";
    const PolicyOutcome cachew_outcome =
        add("Cachew autoscaling", Drive(cachew, shape.job, 1, 0), scale_oracle, false, plot);
    const PolicyOutcome model_outcome =
        add("Granary autoscaling", Drive(model, shape.job, 1, 0), scale_oracle, true, plot);
    ReportGranaryVsBaseline(report, shape.name, PolicyKind::kAutoscaling, model_outcome,
                            cachew_outcome);
    // Placement: local and remote workers, from none.
    const PlacementChoice place_oracle =
        CheapestNearBest(true_batch_s, kMaxRemote, kMaxLocal, options);
    ReportOracle(report, shape.name, PolicyKind::kPlacement, place_oracle);
    PecanPlacement pecan(options);
    ModelPlacement model_placement(options);
    const PolicyOutcome pecan_outcome =
        add("Pecan placement", Drive(pecan, shape.job, 0, 0), place_oracle, false, plot);
    const PolicyOutcome placed =
        add("Granary placement", Drive(model_placement, shape.job, 0, 0), place_oracle, true, plot);
    ReportGranaryVsBaseline(report, shape.name, PolicyKind::kPlacement, placed, pecan_outcome);
  }
  report.AddNote(
      "Simulated: the policies observe dispatcher/policy/simulated_job.h, not a running "
      "cluster; prices $0.427 per remote worker-hour and $4.96 per trainer-hour (Pecan's). The "
      "oracle: the cheapest static configuration within 5% of the best batch time. Pecan's rule "
      "can stop cheaper per batch than the oracle only by being slower than that bound.");
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::BenchMain(argc, argv, "policy_bench", granary::Run);
}
