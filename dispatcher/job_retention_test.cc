// JobRetention: a job idle past the retention period with every epoch finished is retired (and
// the hook told its tasks); an active job, or one with an unfinished epoch, stays.
#include "dispatcher/job_retention.h"

#include <map>
#include <vector>

#include "testing/manual_clock_env.h"
#include "dispatcher/memory_log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

constexpr int64_t kRetentionMs = 1000;

class JobRetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Update dataset;
    dataset.mutable_register_dataset()->set_dataset_id("d");
    ASSERT_TRUE(core_->Propose(dataset).ok());
    Update worker;
    worker.mutable_register_worker()->set_worker_id("w");
    worker.mutable_register_worker()->set_address("w:1");
    ASSERT_TRUE(core_->Propose(worker).ok());
  }
  // A job with epoch 0 started (one task, one split); returns its id.
  int64_t StartJob() {
    Update job;
    job.mutable_create_job()->set_dataset_id("d");
    job.mutable_create_job()->mutable_options()->set_num_worker_slots(1);
    EXPECT_TRUE(core_->Propose(job).ok());
    const int64_t id = core_->Read([](const DispatcherState& s) { return s.next_job_id() - 1; });
    Update epoch;
    epoch.mutable_start_epoch()->set_job_id(id);
    epoch.mutable_start_epoch()->add_plan()->set_id(0);
    EXPECT_TRUE(core_->Propose(epoch).ok());
    retention_.MarkActive(id);
    return id;
  }
  std::vector<int64_t> Tasks(int64_t job) {
    return core_->Read([&](const DispatcherState& s) {
      const EpochState* epoch = s.FindEpoch(job, 0);
      return std::vector<int64_t>(epoch->task_ids().begin(), epoch->task_ids().end());
    });
  }
  void Finish(int64_t task) {
    Update finished;
    finished.mutable_task_finished()->set_task_id(task);
    finished.mutable_task_finished()->set_generation(
        core_->Read([&](const DispatcherState& s) { return s.FindTask(task)->generation(); }));
    ASSERT_TRUE(core_->Propose(finished).ok());
  }
  bool Exists(int64_t job) {
    return core_->Read([&](const DispatcherState& s) { return s.FindJob(job) != nullptr; });
  }

  std::unique_ptr<DispatcherCore> core_ = OpenMemoryCore(std::make_shared<LogContents>());
  ManualClockEnv clock_{Env::Default()};
  std::map<int64_t, std::vector<int64_t>> retired_;
  JobRetention retention_{
      core_.get(), &clock_, kRetentionMs,
      [this](int64_t job, const std::vector<int64_t>& tasks) { retired_[job] = tasks; }};
};

TEST_F(JobRetentionTest, OnlyIdleJobsWithEveryEpochFinishedAreRetired) {
  const int64_t idle = StartJob();
  const int64_t running = StartJob();
  const int64_t active = StartJob();
  const std::vector<int64_t> idle_tasks = Tasks(idle);
  Finish(idle_tasks[0]);
  Finish(Tasks(active)[0]);
  clock_.AdvanceMicros(kRetentionMs * 1000 + 1);
  retention_.MarkActive(active);
  ASSERT_TRUE(retention_.RetireIdleJobs().ok());
  EXPECT_FALSE(Exists(idle));
  EXPECT_TRUE(Exists(running)) << "its epoch is not finished";
  EXPECT_TRUE(Exists(active)) << "a client asked about it";
  EXPECT_THAT(retired_, ElementsAre(Pair(idle, idle_tasks)));
  EXPECT_FALSE(retention_.LastActive(idle).has_value());
  EXPECT_TRUE(retention_.LastActive(active).has_value());
}

}  // namespace
}  // namespace granary
