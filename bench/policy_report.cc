#include "bench/policy_report.h"

#include "absl/strings/str_cat.h"

namespace granary {

void ReportOracle(BenchReport& report, const std::string& shape, PolicyKind kind,
                  const PlacementChoice& oracle) {
  const std::string name =
      kind == PolicyKind::kAutoscaling
          ? absl::StrCat(shape, ": autoscaling oracle (", oracle.remote, " remote)")
          : absl::StrCat(shape, ": placement oracle (", oracle.remote, " remote + ", oracle.local,
                         " local)");
  report.AddSeries(name, "$ per 1000 batches", {1e3 * oracle.cost_per_batch});
}

void ReportPolicyOutcome(BenchReport& report, const std::string& shape,
                         const PolicyOutcome& outcome, const PlacementChoice& oracle,
                         bool granary) {
  const std::string name = absl::StrCat(shape, ": ", outcome.policy, " (", outcome.remote,
                                        " remote + ", outcome.local, " local)");
  report.AddSeries(name, "ms per batch", {1e3 * outcome.batch_s});
  report.AddSeries(name, "$ per 1000 batches", {1e3 * outcome.cost_per_batch});
  report.AddSeries(name, "decisions", {static_cast<double>(outcome.decisions)});
  const std::string policy = absl::StrCat(shape, ": ", outcome.policy);
  const BenchTarget near_oracle = granary ? BenchTarget::AtMost(1.05) : BenchTarget();
  report.AddHeadline(policy + " cost / oracle", outcome.cost_per_batch / oracle.cost_per_batch, "x",
                     near_oracle);
  report.AddHeadline(policy + " batch time / oracle", outcome.batch_s / oracle.batch_s, "x",
                     near_oracle);
  if (granary) {
    report.AddHeadline(policy + " decisions", static_cast<double>(outcome.decisions), "",
                       BenchTarget::AtMost(3));
  }
}

void ReportGranaryVsBaseline(BenchReport& report, const std::string& shape, PolicyKind kind,
                             const PolicyOutcome& granary, const PolicyOutcome& baseline) {
  report.AddHeadline(absl::StrCat(shape, ": Granary / ", baseline.policy, " cost"),
                     granary.cost_per_batch / baseline.cost_per_batch, "x",
                     kind == PolicyKind::kAutoscaling ? BenchTarget::AtMost(1.0) : BenchTarget());
}

}  // namespace granary
