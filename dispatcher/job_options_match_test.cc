#include "dispatcher/job_options_match.h"

#include <string>
#include <vector>

#include "dispatcher/dispatcher_state.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// The options job 'resnet' is created with in these tests: every field set but autoscale
// (which a placement policy excludes).
JobOptions ResnetOptions() {
  JobOptions options;
  options.set_seed(7);
  options.set_num_consumers(2);
  options.set_num_worker_slots(3);
  options.set_num_epochs(10);
  options.set_cache_policy(CACHE_FULL);
  options.add_readers("bob");
  options.add_readers("carol");
  options.set_num_local_slots(1);
  options.set_placement(PLACEMENT_PECAN);
  options.set_auto_order(true);
  return options;
}

// A state holding job 1, 'resnet', created with `options`.
DispatcherState StateWithJob(const JobOptions& options) {
  DispatcherState state;
  Update dataset;
  dataset.mutable_register_dataset()->set_dataset_id("d");
  EXPECT_TRUE(state.Apply(1, dataset).ok());
  Update job;
  job.mutable_create_job()->set_name("resnet");
  job.mutable_create_job()->set_dataset_id("d");
  *job.mutable_create_job()->mutable_options() = options;
  const absl::Status created = state.Apply(2, job);
  EXPECT_TRUE(created.ok()) << created;
  return state;
}

TEST(JobOptionsMatchTest, EqualOptionsAreAccepted) {
  const DispatcherState state = StateWithJob(ResnetOptions());
  EXPECT_TRUE(CheckJobOptionsMatch(*state.FindJob(1), ResnetOptions()).ok());
}

TEST(JobOptionsMatchTest, ReadersAreComparedAsASet) {
  const DispatcherState state = StateWithJob(ResnetOptions());
  JobOptions reordered = ResnetOptions();
  reordered.clear_readers();
  for (const char* reader : {"carol", "bob", "carol"}) reordered.add_readers(reader);
  EXPECT_TRUE(CheckJobOptionsMatch(*state.FindJob(1), reordered).ok());
}

TEST(JobOptionsMatchTest, ZeroConsumersIsOneAsTheJobWasCreated) {
  JobOptions unset = ResnetOptions();
  unset.set_num_consumers(0);
  const DispatcherState state = StateWithJob(unset);
  JobOptions one = ResnetOptions();
  one.set_num_consumers(1);
  EXPECT_TRUE(CheckJobOptionsMatch(*state.FindJob(1), one).ok());
  EXPECT_TRUE(CheckJobOptionsMatch(*state.FindJob(1), unset).ok());
}

// Each data- or policy-defining field that differs is refused, naming it and both values.
TEST(JobOptionsMatchTest, EachDifferingFieldIsRefusedWithItsNameAndBothValues) {
  const DispatcherState state = StateWithJob(ResnetOptions());
  struct Case {
    void (*change)(JobOptions*);
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](JobOptions* o) { o->set_seed(8); }, "job 'resnet' has seed 7; this request gives 8"},
      {[](JobOptions* o) { o->set_num_consumers(4); },
       "job 'resnet' has num_consumers 2; this request gives 4 (to resume it at 4 consumers, "
       "give the positions all 2 saved: elastic resume)"},
      {[](JobOptions* o) { o->set_num_worker_slots(5); },
       "job 'resnet' has num_worker_slots 3; this request gives 5"},
      {[](JobOptions* o) { o->set_num_epochs(0); },
       "job 'resnet' has num_epochs 10; this request gives 0"},
      {[](JobOptions* o) { o->set_cache_policy(CACHE_COMPUTE); },
       "job 'resnet' has cache_policy CACHE_FULL; this request gives CACHE_COMPUTE"},
      {[](JobOptions* o) { o->add_readers("mallory"); },
       "job 'resnet' has readers [\"bob\", \"carol\"]; this request gives [\"bob\", \"carol\", "
       "\"mallory\"]"},
      {[](JobOptions* o) { o->set_autoscale(AUTOSCALE_CACHEW); },
       "job 'resnet' has autoscale AUTOSCALE_NONE; this request gives AUTOSCALE_CACHEW"},
      {[](JobOptions* o) { o->set_num_local_slots(0); },
       "job 'resnet' has num_local_slots 1; this request gives 0"},
      {[](JobOptions* o) { o->set_placement(PLACEMENT_AUTO); },
       "job 'resnet' has placement PLACEMENT_PECAN; this request gives PLACEMENT_AUTO"},
      {[](JobOptions* o) { o->set_auto_order(false); },
       "job 'resnet' has auto_order true; this request gives false"},
      {[](JobOptions* o) { o->set_sharding(SHARDING_DYNAMIC); },
       "job 'resnet' has sharding SHARDING_AUTO; this request gives SHARDING_DYNAMIC"},
      {[](JobOptions* o) { o->set_remainder(REMAINDER_DROP); },
       "job 'resnet' has remainder REMAINDER_PAD; this request gives REMAINDER_DROP"},
      {[](JobOptions* o) { o->set_tail(TAIL_WORKER); },
       "job 'resnet' has tail TAIL_AUTO; this request gives TAIL_WORKER"},
  };
  // Every field of JobOptions has its case: a field added later is compared too.
  EXPECT_EQ(cases.size(), static_cast<size_t>(JobOptions::descriptor()->field_count()));
  for (const Case& c : cases) {
    JobOptions differing = ResnetOptions();
    c.change(&differing);
    const absl::Status status = CheckJobOptionsMatch(*state.FindJob(1), differing);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << c.message << ": " << status;
    EXPECT_EQ(status.message(), c.message);
  }
}

// ScaleJob (and the autoscaler, through it) changes the job's slots at run time; a trainer
// restarted with the spec it created the job with still opens it, and one giving the scaled
// counts is refused naming the counts the job was created with.
TEST(JobOptionsMatchTest, SlotsAreComparedAsCreatedAfterScaling) {
  DispatcherState state = StateWithJob(ResnetOptions());
  Update scale;
  scale.mutable_scale_job()->set_job_id(1);
  scale.mutable_scale_job()->set_num_worker_slots(6);
  scale.mutable_scale_job()->set_num_local_slots(2);
  ASSERT_TRUE(state.Apply(3, scale).ok());
  ASSERT_EQ(state.FindJob(1)->options().num_worker_slots(), 6);
  EXPECT_TRUE(CheckJobOptionsMatch(*state.FindJob(1), ResnetOptions()).ok());
  JobOptions scaled = ResnetOptions();
  scaled.set_num_worker_slots(6);
  EXPECT_THAT(CheckJobOptionsMatch(*state.FindJob(1), scaled).message(),
              HasSubstr("has num_worker_slots 3; this request gives 6"));
}

// A job of a snapshot written before the created slot counts were kept: its slots are not
// compared (what it was created with is unknown), everything else is.
TEST(JobOptionsMatchTest, JobOfAnOlderSnapshotIsComparedWithoutItsSlots) {
  DispatcherState state = StateWithJob(ResnetOptions());
  DispatcherStateProto proto = state.ToProto();
  proto.mutable_jobs(0)->clear_created_num_worker_slots();
  proto.mutable_jobs(0)->clear_created_num_local_slots();
  proto.mutable_jobs(0)->mutable_options()->set_num_worker_slots(6);
  const absl::StatusOr<DispatcherState> older = DispatcherState::FromProto(proto);
  ASSERT_TRUE(older.ok()) << older.status();
  JobOptions any_slots = ResnetOptions();
  any_slots.set_num_worker_slots(1);
  any_slots.set_num_local_slots(0);
  EXPECT_TRUE(CheckJobOptionsMatch(*older->FindJob(1), any_slots).ok());
  any_slots.set_seed(8);
  EXPECT_EQ(CheckJobOptionsMatch(*older->FindJob(1), any_slots).message(),
            "job 'resnet' has seed 7; this request gives 8");
}

}  // namespace
}  // namespace granary
