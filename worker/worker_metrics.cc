#include "worker/worker_metrics.h"

#include "absl/strings/str_cat.h"

namespace granary {

const WorkerMetrics::Job& WorkerMetrics::ForJob(int64_t job_id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) return it->second;
  const MetricLabels job = {{"job", absl::StrCat(job_id)}};
  MetricLabels from_checkpoint = job, from_start = job;
  from_checkpoint.emplace_back("source", "checkpoint");
  from_start.emplace_back("source", "start");
  constexpr char kRestores[] =
      "Task runners that resumed a partly read task, by where they resumed from.";
  Job counters{
      registry_->GetCounter("granary_worker_elements_served_total",
                            "Elements sent to readers for the first time.", job),
      registry_->GetCounter("granary_worker_bytes_served_total",
                            "Bytes of elements sent to readers (on the wire or by segment).", job),
      registry_->GetCounter("granary_worker_elements_resent_total",
                            "Elements sent again because a reader asked again (duplicates the "
                            "reader drops).",
                            job),
      registry_->GetCounter("granary_worker_elements_recomputed_total",
                            "Elements made again to reach the index a reader needs after a "
                            "restore.",
                            job),
      registry_->GetCounter("granary_worker_restores_total", kRestores, from_checkpoint),
      registry_->GetCounter("granary_worker_restores_total", kRestores, from_start),
      registry_->GetCounter("granary_worker_checkpoints_total", "Task checkpoints written.", job),
      registry_->GetCounter("granary_worker_checkpoint_bytes_total",
                            "Bytes of task checkpoints written.", job),
      registry_->GetCounter("granary_worker_checkpoint_stall_seconds_total",
                            "Time producers were held up saving iterator state.", job),
  };
  return jobs_.emplace(job_id, counters).first->second;
}

}  // namespace granary
