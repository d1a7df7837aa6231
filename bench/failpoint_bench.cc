// What a failpoint costs a hot path: HitFailpoint() when no failpoint is armed (every production
// run), against the same loop without it, and when some other failpoint is armed (a chaos run:
// every hit then takes the slow path, a mutex and a map lookup).
//
// Each measurement runs --hits hits of get.mid_chunk (a failpoint passed once per cache record
// read); the modes are interleaved per repetition. Prints the median ns per hit of each, the
// spread (max - min), and the extra ns per hit over the baseline.
//
//   bench/failpoint_bench [--hits 20000000] [--repetitions 5]
#include <cstdio>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_report.h"
#include "bench/sample_stats.h"
#include "common/status_macros.h"
#include "common/failpoints.h"

ABSL_FLAG(int64_t, hits, 20000000, "Failpoint hits per measurement.");
ABSL_FLAG(int, repetitions, 5, "Measurements per mode.");

namespace granary {
namespace {

// The loop body every mode shares: a status checked and an accumulator the compiler must keep.
template <typename Hit>
double NanosPerHit(int64_t hits, Hit hit) {
  int64_t ok = 0;
  const absl::Time start = absl::Now();
  for (int64_t i = 0; i < hits; ++i) {
    ok += hit().ok();
    asm volatile("" : "+r"(ok));  // Keeps each iteration's work.
  }
  const double ns = absl::ToDoubleNanoseconds(absl::Now() - start) / hits;
  return ok == hits ? ns : -1;  // -1: a hit failed (it must not).
}

absl::Status Run() {
  const bool quick = QuickBench();
  const int64_t hits = quick ? 100000 : absl::GetFlag(FLAGS_hits);
  const int reps = quick ? 1 : absl::GetFlag(FLAGS_repetitions);
  std::vector<double> baseline, disarmed, armed_elsewhere;
  for (int r = 0; r < reps; ++r) {
    RETURN_IF_ERROR(ConfigureFailpoints(""));
    baseline.push_back(NanosPerHit(hits, [] { return absl::OkStatus(); }));
    disarmed.push_back(NanosPerHit(hits, [] { return HitFailpoint(kGetMidChunk); }));
    RETURN_IF_ERROR(ConfigureFailpoints("journal.mid_group_commit=after(1000000000):crash"));
    armed_elsewhere.push_back(NanosPerHit(hits / 20, [] { return HitFailpoint(kGetMidChunk); }));
  }
  BenchReport report("failpoint", "Failpoints: cost per hit on a hot path", reps);
  report.AddSeries("no failpoint (baseline loop)", "ns/hit", baseline);
  report.AddSeries("failpoint, none armed (production)", "ns/hit", disarmed);
  report.AddSeries("failpoint, another one armed (chaos runs)", "ns/hit", armed_elsewhere);
  report.AddHeadline("extra per hit, none armed", Median(disarmed) - Median(baseline), "ns");
  report.AddHeadline("extra per hit, another one armed", Median(armed_elsewhere) - Median(baseline),
                     "ns");
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::BenchMain(argc, argv, "failpoint_bench", granary::Run);
}
