#include "dispatcher/job_metrics_collector.h"

#include <cstdint>

namespace granary {

JobMetricsCollector::Totals JobMetricsCollector::Increase(Totals& last, const Totals& now) {
  Totals increase = now;
  if (now.count >= last.count && now.a_us >= last.a_us && now.b_us >= last.b_us) {
    increase = {now.count - last.count, now.a_us - last.a_us, now.b_us - last.b_us};
  }
  last = now;
  return increase;
}

JobMetricsCollector::ReaderIncrease JobMetricsCollector::ReaderTotals(int64_t job, int32_t consumer,
                                                                      int64_t delivered,
                                                                      int64_t wait_us,
                                                                      int64_t step_us) {
  const Totals add = Increase(readers_[{job, consumer}], {delivered, wait_us, step_us});
  Period& period = periods_[job];
  period.delivered += add.count;
  period.wait_us += add.a_us;
  period.step_us += add.b_us;
  return {add.count, add.a_us, add.b_us};
}

void JobMetricsCollector::ProducerTotals(int64_t job, int64_t task, bool local, int64_t produced,
                                         int64_t busy_us) {
  const Totals add = Increase(producers_[{job, task}], {produced, busy_us, 0});
  Period& period = periods_[job];
  period.produced[local] += add.count;
  period.busy_us[local] += add.a_us;
}

std::optional<JobMetrics> JobMetricsCollector::Take(int64_t job, int64_t min_delivered) {
  auto it = periods_.find(job);
  if (it == periods_.end()) return std::nullopt;
  const Period& p = it->second;
  const auto rate = [&](bool local) {
    return p.busy_us[local] > 0 ? p.produced[local] / (p.busy_us[local] / 1e6) : 0.0;
  };
  if (p.delivered < min_delivered || p.delivered <= 0 || (rate(false) <= 0 && rate(true) <= 0)) {
    return std::nullopt;
  }
  JobMetrics m;
  m.wait_s = p.wait_us / 1e6 / p.delivered;
  m.step_s = p.step_us / 1e6 / p.delivered;
  m.remote_worker_rate = rate(false);
  m.local_worker_rate = rate(true);
  periods_.erase(it);
  return m;
}

void JobMetricsCollector::ForgetTask(int64_t job, int64_t task) { producers_.erase({job, task}); }

void JobMetricsCollector::Forget(int64_t job) {
  periods_.erase(job);
  readers_.erase(readers_.lower_bound({job, INT32_MIN}),
                 readers_.lower_bound({job + 1, INT32_MIN}));
  producers_.erase(producers_.lower_bound({job, INT64_MIN}),
                   producers_.lower_bound({job + 1, INT64_MIN}));
}

}  // namespace granary
