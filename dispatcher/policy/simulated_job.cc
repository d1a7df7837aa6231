#include "dispatcher/policy/simulated_job.h"

#include <algorithm>
#include <limits>

namespace granary {

JobMetrics SimulatedJob::Measure(int32_t remote, int32_t local) const {
  JobMetrics m;
  m.remote_workers = remote;
  m.local_workers = local;
  m.step_s = step_s * (1 + slowdown_per_local * local);
  const double supply = remote * remote_rate + local * local_rate;
  const double batch_s = supply <= 0 ? 1e9 : std::max(m.step_s, 1 / supply);
  m.wait_s = batch_s - m.step_s;
  m.remote_worker_rate = remote_rate;
  m.local_worker_rate = local > 0 ? local_rate : 0;
  return m;
}

}  // namespace granary
