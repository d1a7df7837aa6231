#include "dispatcher/job_activity.h"

namespace granary {

void JobActivityTracker::AddDelivered(int64_t job, int64_t delivered, int64_t wait_us,
                                      int64_t step_us, uint64_t now_us) {
  Job& j = jobs_[job];
  j.delivered += delivered;
  j.wait_us += wait_us;
  j.step_us += step_us;
  j.recent.push_back({now_us, j.delivered, j.wait_us});
  // Samples older than the window go, but two stay: a rate needs two.
  while (j.recent.size() > 2 && j.recent.front().at_us + kWindowUs < now_us) j.recent.pop_front();
}

void JobActivityTracker::TaskReport(int64_t task, int64_t produced, const std::string& transport) {
  Task& t = tasks_[task];
  t.produced = produced;
  if (!transport.empty()) t.transport = transport;
}

void JobActivityTracker::ForgetTask(int64_t task) { tasks_.erase(task); }

void JobActivityTracker::Forget(int64_t job) { jobs_.erase(job); }

std::vector<JobActivity> JobActivityTracker::Jobs(uint64_t now_us) const {
  std::vector<JobActivity> out;
  for (const auto& [id, j] : jobs_) {
    JobActivity& a = out.emplace_back();
    a.set_job_id(id);
    a.set_delivered(j.delivered);
    a.set_wait_us(j.wait_us);
    a.set_step_us(j.step_us);
    // From the oldest sample in the window to now: a job whose trainers went quiet decays to 0.
    if (j.recent.size() >= 2 && now_us > j.recent.front().at_us) {
      const Sample& first = j.recent.front();
      const Sample& last = j.recent.back();
      const int64_t delivered = last.delivered - first.delivered;
      a.set_elements_per_second(delivered / ((now_us - first.at_us) / 1e6));
      if (delivered > 0) {
        a.set_wait_seconds_per_element((last.wait_us - first.wait_us) / 1e6 / delivered);
      }
    }
  }
  return out;
}

void JobActivityTracker::FillTask(int64_t task, TaskActivity* activity) const {
  const auto it = tasks_.find(task);
  if (it == tasks_.end()) return;
  activity->set_produced(it->second.produced);
  activity->set_transport(it->second.transport);
}

}  // namespace granary
