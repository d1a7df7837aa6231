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
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/sample_stats.h"
#include "faultinject/failpoints.h"

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

int Main() {
  const int64_t hits = absl::GetFlag(FLAGS_hits);
  std::vector<double> baseline, disarmed, armed_elsewhere;
  for (int r = 0; r < absl::GetFlag(FLAGS_repetitions); ++r) {
    if (!ConfigureFailpoints("").ok()) return 1;
    baseline.push_back(NanosPerHit(hits, [] { return absl::OkStatus(); }));
    disarmed.push_back(NanosPerHit(hits, [] { return HitFailpoint(kGetMidChunk); }));
    if (!ConfigureFailpoints("journal.mid_group_commit=after(1000000000):crash").ok()) return 1;
    armed_elsewhere.push_back(NanosPerHit(hits / 20, [] { return HitFailpoint(kGetMidChunk); }));
  }
  std::printf("%-34s %12s %10s %14s\n", "mode", "ns/hit", "spread", "extra ns/hit");
  const auto row = [&](const char* mode, const std::vector<double>& ns) {
    std::printf("%-34s %12.3f %10.3f %14.3f\n", mode, Median(ns), Spread(ns),
                Median(ns) - Median(baseline));
  };
  row("no failpoint (baseline)", baseline);
  row("failpoint, none armed", disarmed);
  row("failpoint, another one armed", armed_elsewhere);
  return 0;
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return granary::Main();
}
