// CheckStateInvariants on states made inconsistent one way at a time, and a dispatcher that
// refuses to start from an inconsistent snapshot.
#include "dispatcher/state_invariants.h"

#include <functional>

#include "common/deterministic_serialization.h"
#include "dispatcher/dispatcher_impl.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "journal/journal.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// Two workers, a job of two consumers x one slot over a 6-split plan, 3 + 2 splits leased,
// task 1 finished; a second job writing cache "k".
DispatcherStateProto ConsistentState() {
  DispatcherState state;
  std::vector<Update> updates(7);
  updates[0].mutable_register_worker()->set_worker_id("a");
  updates[0].mutable_register_worker()->set_address("a:1");
  updates[1].mutable_register_worker()->set_worker_id("b");
  updates[1].mutable_register_worker()->set_address("b:1");
  updates[2].mutable_register_dataset()->set_dataset_id("d");
  CreateJobUpdate* job = updates[3].mutable_create_job();
  job->set_dataset_id("d");
  job->mutable_options()->set_num_consumers(2);
  job->mutable_options()->set_num_worker_slots(1);
  StartEpochUpdate* start = updates[4].mutable_start_epoch();
  start->set_job_id(1);
  for (int i = 0; i < 6; ++i) start->add_plan()->set_id(i);
  updates[5].mutable_lease_splits()->set_task_id(1);
  updates[5].mutable_lease_splits()->set_max(3);
  updates[6].mutable_lease_splits()->set_task_id(2);
  updates[6].mutable_lease_splits()->set_max(2);
  for (const Update& u : updates) EXPECT_TRUE(state.Apply(state.applied_seq() + 1, u).ok());
  Update finished;
  finished.mutable_task_finished()->set_task_id(1);
  finished.mutable_task_finished()->set_generation(1);
  finished.mutable_task_finished()->set_num_elements(30);
  EXPECT_TRUE(state.Apply(state.applied_seq() + 1, finished).ok());
  Update cached_job;
  cached_job.mutable_create_job()->set_dataset_id("d");
  EXPECT_TRUE(state.Apply(state.applied_seq() + 1, cached_job).ok());
  Update put;
  put.mutable_start_epoch()->set_job_id(2);
  put.mutable_start_epoch()->add_plan()->set_id(0);
  put.mutable_start_epoch()->mutable_cache()->set_mode(EpochCache::PUT);
  put.mutable_start_epoch()->mutable_cache()->set_cache_key("k");
  EXPECT_TRUE(state.Apply(state.applied_seq() + 1, put).ok());
  return state.ToProto();
}

absl::Status Check(const DispatcherStateProto& proto) {
  auto state = DispatcherState::FromProto(proto);
  if (!state.ok()) return state.status();
  return CheckStateInvariants(*state);
}

TEST(StateInvariantsTest, AConsistentStatePasses) {
  const absl::Status status = Check(ConsistentState());
  EXPECT_TRUE(status.ok()) << status;
}

struct Corruption {
  const char* name;
  std::function<void(DispatcherStateProto&)> apply;
  const char* expected;
};

TEST(StateInvariantsTest, EachKindOfInconsistencyIsDataLossNamingIt) {
  const std::vector<Corruption> corruptions = {
      {"a split leased twice",
       [](DispatcherStateProto& p) { *p.mutable_tasks(1)->add_leased() = p.tasks(0).leased(0); },
       "not the 5 the plan leased (a split leased twice, or lost)"},
      {"a leased split lost",
       [](DispatcherStateProto& p) { p.mutable_tasks(1)->mutable_leased()->RemoveLast(); },
       "(a split leased twice, or lost)"},
      {"a task on an unknown worker",
       [](DispatcherStateProto& p) { p.mutable_tasks(1)->set_worker_id("ghost"); },
       "task 2 is assigned to worker ghost, which is unknown"},
      {"a task on a lost worker",
       [](DispatcherStateProto& p) { p.mutable_workers(1)->set_lost(true); }, "which is lost"},
      {"an epoch listing a task that does not exist",
       [](DispatcherStateProto& p) { p.mutable_epochs(0)->add_task_ids(99); },
       "job 1 epoch 0 lists task 99"},
      {"a task no epoch lists",
       [](DispatcherStateProto& p) { p.mutable_epochs(1)->mutable_task_ids()->RemoveLast(); },
       "the epochs list 3 tasks, but 4 exist"},
      {"a job over a missing dataset",
       [](DispatcherStateProto& p) { p.mutable_jobs(0)->set_dataset_id("nope"); },
       "job 1 reads dataset nope, which does not exist"},
      {"a job with hostile counts",
       [](DispatcherStateProto& p) {
         p.mutable_jobs(0)->mutable_options()->set_num_consumers(2147483647);
       },
       "num_consumers is 2147483647"},
      {"a job id beyond next_job_id", [](DispatcherStateProto& p) { p.set_next_job_id(2); },
       "job 2 is not below next_job_id 2"},
      {"an epoch finished with an unfinished task",
       [](DispatcherStateProto& p) { p.mutable_epochs(0)->set_finished(true); },
       "job 1 epoch 0 is marked finished, but not all of its tasks are"},
      {"an incomplete cache nobody writes",
       [](DispatcherStateProto& p) { p.mutable_caches(0)->set_put_epoch(5); },
       "cache k is incomplete but job 2 epoch 5 is not writing it"},
      {"a complete cache whose manifest is not its tasks' chunks",
       [](DispatcherStateProto& p) {
         p.mutable_caches(0)->set_complete(true);
         p.mutable_caches(0)->add_chunks()->set_path("/elsewhere");
       },
       "cache k: its manifest is not the chunks of job 2 epoch 0's tasks"},
      {"two tasks in one slot",
       [](DispatcherStateProto& p) { p.mutable_tasks(1)->set_consumer(0); },
       "task 2 has consumer 0 slot 0: out of range or taken twice"},
      {"two leases of one consumer",
       [](DispatcherStateProto& p) {
         for (int i = 0; i < 2; ++i) {
           ConsumerLease& lease = *p.mutable_jobs(0)->add_leases();
           lease.set_reader_id("r");
           lease.set_generation(1);
         }
       },
       "lists a lease of consumer 0 that is out of range or listed twice"},
      {"a lease of a consumer the job does not have",
       [](DispatcherStateProto& p) {
         ConsumerLease& lease = *p.mutable_jobs(0)->add_leases();
         lease.set_consumer(p.jobs(0).options().num_consumers());
         lease.set_generation(1);
       },
       "that is out of range or listed twice"},
      {"a lease of generation 0",
       [](DispatcherStateProto& p) { p.mutable_jobs(0)->add_leases()->set_reader_id("r"); },
       "job 1 consumer 0 has a lease of generation 0"},
      {"a released lease naming a holder",
       [](DispatcherStateProto& p) {
         ConsumerLease& lease = *p.mutable_jobs(0)->add_leases();
         lease.set_description("host:1");
         lease.set_generation(1);
       },
       "has a released lease that describes a holder"},
  };
  for (const Corruption& c : corruptions) {
    DispatcherStateProto proto = ConsistentState();
    c.apply(proto);
    const absl::Status status = Check(proto);
    EXPECT_TRUE(absl::IsDataLoss(status)) << c.name << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.expected)) << c.name;
  }
}

TEST(StateInvariantsTest, ADispatcherRefusesToStartFromAnInconsistentSnapshot) {
  testing::ScopedTempDir dir;
  const std::string journal_dir = dir.path() + "/journal";
  {
    auto journal = Journal::Open(journal_dir, {});
    ASSERT_TRUE(journal.ok()) << journal.status();
    DispatcherStateProto proto = ConsistentState();
    *proto.mutable_tasks(1)->add_leased() = proto.tasks(0).leased(0);
    // A snapshot covers records that were appended.
    for (uint64_t seq = 1; seq <= proto.applied_seq(); ++seq)
      ASSERT_TRUE((*journal)->Append("").ok());
    const absl::Status written =
        (*journal)->WriteSnapshot(proto.applied_seq(), SerializeDeterministically(proto));
    ASSERT_TRUE(written.ok()) << written;
  }
  PipelineRegistries registries;
  DispatcherOptions options;
  options.journal_dir = journal_dir;
  options.registries = &registries;
  auto impl = DispatcherImpl::Open(options);
  EXPECT_TRUE(absl::IsDataLoss(impl.status())) << impl.status();
  EXPECT_THAT(std::string(impl.status().message()), HasSubstr("a split leased twice"));
}

}  // namespace
}  // namespace granary
