// A resource policy's decision: how many workers a job should have, and why (journaled with
// the scaling step and shown by `granary status`).
#ifndef GRANARY_DISPATCHER_POLICY_SCALING_DECISION_H_
#define GRANARY_DISPATCHER_POLICY_SCALING_DECISION_H_

#include <cstdint>
#include <string>

namespace granary {

struct ScalingDecision {
  int32_t remote_workers = 0;
  int32_t local_workers = 0;
  std::string reason;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_POLICY_SCALING_DECISION_H_
