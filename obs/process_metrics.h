// The process' own resource use for /metrics, read from /proc/self at each scrape under the
// names Prometheus' client libraries use: process_resident_memory_bytes,
// process_cpu_seconds_total (user + system), process_threads, process_open_fds.
#ifndef GRANARY_OBS_PROCESS_METRICS_H_
#define GRANARY_OBS_PROCESS_METRICS_H_

#include "obs/metrics.h"

namespace granary {

// Adds a collector of the process' metrics to `registry`.
void AddProcessMetrics(MetricRegistry& registry);

}  // namespace granary

#endif  // GRANARY_OBS_PROCESS_METRICS_H_
