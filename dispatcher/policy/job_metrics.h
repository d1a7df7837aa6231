// What the resource policies see of a job (issue 17): one observation, from the trainer's
// client heartbeats and the workers' heartbeats, averaged over the last measurement period.
// Rates are in batches (the elements a trainer steps on) per second.
#ifndef GRANARY_DISPATCHER_POLICY_JOB_METRICS_H_
#define GRANARY_DISPATCHER_POLICY_JOB_METRICS_H_

#include <cstdint>

namespace granary {

struct JobMetrics {
  // Workers serving the job (its tasks per consumer) when measured: remote ones, and local
  // ones (on the trainer's host, serving only it).
  int32_t remote_workers = 0;
  int32_t local_workers = 0;
  // The trainer, per batch: seconds waiting for data, and seconds computing its step.
  double wait_s = 0;
  double step_s = 0;
  // Batches per second one worker produces while it is not held back by a full window, remote
  // and local (0: not measured yet).
  double remote_worker_rate = 0;
  double local_worker_rate = 0;

  int32_t workers() const { return remote_workers + local_workers; }
  // The trainer's time per batch: what Cachew's rule compares.
  double batch_s() const { return wait_s + step_s; }
  // The share of that time the trainer waits for data (0 when nothing was measured).
  double wait_fraction() const { return batch_s() > 0 ? wait_s / batch_s() : 0; }
};

// The prices Pecan's AutoPlacement weighs (its defaults: a remote worker $0.427/h, the
// trainer — the accelerator host — $4.96/h).
struct Prices {
  double worker_per_hour = 0.427;
  double trainer_per_hour = 4.96;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_POLICY_JOB_METRICS_H_
