#include "dispatcher/assignment_policy.h"

namespace granary {

std::vector<std::string> AssignNewTasks(const std::map<std::string, WorkerState>& workers,
                                        int64_t num_tasks) {
  std::vector<std::string> active;
  for (const auto& [id, w] : workers) {
    if (!w.lost() && !w.standby()) active.push_back(id);
  }
  std::vector<std::string> assignment(num_tasks);
  for (int64_t i = 0; i < num_tasks && !active.empty(); ++i) {
    assignment[i] = active[i % active.size()];
  }
  return assignment;
}

std::string ChooseTakeover(const std::map<std::string, WorkerState>& workers,
                           const std::map<std::string, int64_t>& loads) {
  for (const auto& [id, load] : loads) {
    if (load == 0 && workers.at(id).standby()) return id;
  }
  std::string best;
  int64_t best_load = INT64_MAX;
  for (const auto& [id, load] : loads) {
    if (load < best_load) {
      best = id;
      best_load = load;
    }
  }
  return best;
}

}  // namespace granary
