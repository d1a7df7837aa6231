// What a process has used, read from /proc: CPU seconds and peak resident memory. Benchmarks read
// their own process (pid 0 = self) and the servers they started.
#ifndef GRANARY_BENCH_PROCESS_STATS_H_
#define GRANARY_BENCH_PROCESS_STATS_H_

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace granary {

// User + system CPU seconds process `pid` (0: this one) has used so far; 0 if it is gone.
double CpuSecondsOf(pid_t pid = 0);
// The sum of CpuSecondsOf over `pids`.
double CpuSecondsOfAll(const std::vector<pid_t>& pids);

// Peak resident set size (VmHWM) of `pid` (0: this one) in bytes; 0 if it is gone.
int64_t PeakRssBytesOf(pid_t pid = 0);
// Current resident set size (VmRSS) in bytes; 0 if it is gone.
int64_t RssBytesOf(pid_t pid = 0);

// Resets `pid`'s peak resident set size to its current size (writes 5 to clear_refs), so that a
// later PeakRssBytesOf covers only what follows. False if the kernel refused.
bool ResetPeakRss(pid_t pid = 0);

}  // namespace granary

#endif  // GRANARY_BENCH_PROCESS_STATS_H_
