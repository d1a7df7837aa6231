#include "dispatcher/assignment_policy.h"

namespace granary {
namespace {

// The least-loaded worker among `loads` that `eligible` accepts (ties: lowest id), or "".
template <typename Eligible>
std::string LeastLoaded(const std::map<std::string, WorkerState>& workers,
                        const std::map<std::string, int64_t>& loads, Eligible eligible) {
  std::string best;
  int64_t best_load = INT64_MAX;
  for (const auto& [id, load] : loads) {
    if (load < best_load && eligible(workers.at(id))) {
      best = id;
      best_load = load;
    }
  }
  return best;
}

}  // namespace

std::vector<std::string> AssignNewTasks(const std::map<std::string, WorkerState>& workers,
                                        int64_t num_tasks) {
  std::vector<std::string> active;
  for (const auto& [id, w] : workers) {
    if (!w.lost() && !w.standby() && !IsLocalWorker(w)) active.push_back(id);
  }
  std::vector<std::string> assignment(num_tasks);
  for (int64_t i = 0; i < num_tasks && !active.empty(); ++i) {
    assignment[i] = active[i % active.size()];
  }
  return assignment;
}

std::string ChooseWorker(const std::map<std::string, WorkerState>& workers,
                         const std::map<std::string, int64_t>& loads, const TaskState& task) {
  if (task.local()) {
    std::string local =
        LeastLoaded(workers, loads, [&](const WorkerState& w) { return IsLocalTo(w, task); });
    if (!local.empty()) return local;
  }
  for (const auto& [id, load] : loads) {
    const WorkerState& w = workers.at(id);
    if (load == 0 && w.standby() && !IsLocalWorker(w)) return id;
  }
  return LeastLoaded(workers, loads, [](const WorkerState& w) { return !IsLocalWorker(w); });
}

}  // namespace granary
