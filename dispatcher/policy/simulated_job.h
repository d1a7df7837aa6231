// A job's behaviour as a function of where its workers run — what the policies' tests and
// bench/policy_bench use as the "machines" a 2-core box does not have: the trainer steps in
// step_s per batch, slowed by slowdown_per_local for each local worker sharing its host; a
// remote worker makes remote_rate batches/s, a local one local_rate; the trainer waits when the
// workers make fewer batches than it takes. Pure arithmetic.
#ifndef GRANARY_DISPATCHER_POLICY_SIMULATED_JOB_H_
#define GRANARY_DISPATCHER_POLICY_SIMULATED_JOB_H_

#include <cstdint>

#include "dispatcher/policy/job_metrics.h"

namespace granary {

struct SimulatedJob {
  double step_s = 0.01;
  double remote_rate = 10;
  double local_rate = 10;
  double slowdown_per_local = 0;

  // What the dispatcher would measure with these workers.
  JobMetrics Measure(int32_t remote, int32_t local = 0) const;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_POLICY_SIMULATED_JOB_H_
