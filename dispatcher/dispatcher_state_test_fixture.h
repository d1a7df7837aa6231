// DispatcherStateTest: a DispatcherState the test applies updates to one by one, checking its
// invariants after each, with the helpers the state's tests share (dispatcher_state_test.cc,
// dispatcher_state_scale_test.cc, dispatcher_state_cache_test.cc).
#ifndef GRANARY_DISPATCHER_DISPATCHER_STATE_TEST_FIXTURE_H_
#define GRANARY_DISPATCHER_DISPATCHER_STATE_TEST_FIXTURE_H_

#include <string>

#include "dispatcher/dispatcher_state.h"
#include "dispatcher/state_invariants.h"
#include "gtest/gtest.h"

namespace granary {

// Applies `u` as the next record; the state must stay consistent whatever `u` was.
inline absl::Status ApplyNext(DispatcherState& state, const Update& u) {
  const absl::Status status = state.Apply(state.applied_seq() + 1, u);
  const absl::Status consistent = CheckStateInvariants(state);
  EXPECT_TRUE(consistent.ok()) << consistent << " after " << u.ShortDebugString();
  return status;
}

class DispatcherStateTest : public ::testing::Test {
 protected:
  absl::Status Apply(const Update& u) { return ApplyNext(state_, u); }

  void Register(const std::string& id, bool standby = false) {
    Update u;
    u.mutable_register_worker()->set_worker_id(id);
    u.mutable_register_worker()->set_address(id + ":1");
    u.mutable_register_worker()->set_standby(standby);
    ASSERT_TRUE(Apply(u).ok());
  }

  // Creates dataset "d", a job and starts its epoch 0 with `splits` splits. The job shards
  // dynamically, whatever its consumers (dispatcher_state_shares_test.cc tests equal shares).
  void StartJob(int consumers, int slots, int splits) {
    Update d;
    d.mutable_register_dataset()->set_dataset_id("d");
    ASSERT_TRUE(Apply(d).ok());
    Update j;
    j.mutable_create_job()->set_dataset_id("d");
    j.mutable_create_job()->mutable_options()->set_num_consumers(consumers);
    j.mutable_create_job()->mutable_options()->set_num_worker_slots(slots);
    j.mutable_create_job()->mutable_options()->set_sharding(SHARDING_DYNAMIC);
    ASSERT_TRUE(Apply(j).ok());
    Update e;
    e.mutable_start_epoch()->set_job_id(1);
    for (int i = 0; i < splits; ++i) e.mutable_start_epoch()->add_plan()->set_id(i);
    ASSERT_TRUE(Apply(e).ok());
  }

  absl::Status Lease(int64_t task, int64_t from, int64_t max) {
    Update u;
    u.mutable_lease_splits()->set_task_id(task);
    u.mutable_lease_splits()->set_from_seq(from);
    u.mutable_lease_splits()->set_max(max);
    return Apply(u);
  }

  absl::Status Lose(const std::string& id, int64_t incarnation) {
    Update u;
    u.mutable_worker_lost()->set_worker_id(id);
    u.mutable_worker_lost()->set_incarnation(incarnation);
    return Apply(u);
  }

  DispatcherState state_;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_DISPATCHER_STATE_TEST_FIXTURE_H_
