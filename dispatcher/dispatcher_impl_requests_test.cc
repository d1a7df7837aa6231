// DispatcherImpl's handlers over a real RocksDB journal: registering workers and datasets,
// opening and retiring jobs, refusing bad or hostile requests before anything is journaled,
// the heartbeats' task definitions, the status page and /metrics, and the provisioner.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "cache/cache_gc.h"
#include "cache/cache_policy.h"
#include "common/deterministic_serialization.h"
#include "common/failpoint.h"
#include "common/status_macros.h"
#include "dispatcher/dispatcher_impl.h"
#include "dispatcher/dispatcher_impl_test_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/pipeline.h"
#include "pipeline/pipeline_loader.h"
#include "testing/exposition_parser.h"
#include "testing/manual_clock_env.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// Issue 30: the nonce naming a worker's shared-memory socket reaches the readers of its tasks
// with its address, survives a dispatcher restart (journaled with the registration), changes
// with a new incarnation, and anything but up to 32 lowercase hex digits is refused.
TEST_F(DispatcherImplTest, AWorkersShmNonceReachesReadersAndIsValidated) {
  Open();
  const auto register_with = [&](const std::string& nonce) {
    RegisterWorkerRequest request;
    request.set_worker_id("a");
    request.set_address("a.local:7000");
    request.set_shm_nonce(nonce);
    RegisterWorkerResponse response;
    return impl_->RegisterWorker(request, &response);
  };
  ASSERT_TRUE(register_with("0123456789abcdef").ok());
  const int64_t job = CreateJob(RegisterRangeDataset(10, 5), "j");
  ASSERT_TRUE(StartEpoch(job, 0).ok());
  const auto reader_sees = [&]() -> std::string {
    ClientHeartbeatRequest request;
    request.set_job_id(job);
    request.set_epoch(0);
    ClientHeartbeatResponse response;
    EXPECT_TRUE(impl_->ClientHeartbeat(request, &response).ok());
    EXPECT_EQ(response.tasks_size(), 1);
    if (response.tasks_size() != 1) return "";
    EXPECT_EQ(response.tasks(0).worker_address(), "a.local:7000");
    return response.tasks(0).worker_shm_nonce();
  };
  EXPECT_EQ(reader_sees(), "0123456789abcdef");
  Open();  // Restart: replayed from the journal.
  EXPECT_EQ(reader_sees(), "0123456789abcdef");
  ASSERT_TRUE(register_with("fedcba9876543210").ok());  // the worker restarted
  EXPECT_EQ(reader_sees(), "fedcba9876543210");
  for (const std::string& bad :
       std::vector<std::string>{"0123456789ABCDEF", "../x", std::string(33, 'a')}) {
    const absl::Status refused = register_with(bad);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << refused;
    EXPECT_THAT(refused.message(), HasSubstr("lowercase hex digits")) << refused;
  }
  EXPECT_EQ(reader_sees(), "fedcba9876543210");
}

TEST_F(DispatcherImplTest, BadRequestsGetClearErrors) {
  Open();
  RegisterWorker("a");
  const std::string dataset = RegisterRangeDataset(10, 5);
  const int64_t job = CreateJob(dataset, "j");
  ASSERT_TRUE(StartEpoch(job, 0).ok());
  EXPECT_THAT(std::string(Splits(99, 0, 1).status().message()), HasSubstr("no task 99"));
  EXPECT_THAT(std::string(Splits(1, 5, 1).status().message()),
              HasSubstr("task 1 has 0 splits leased; cannot answer from seq 5"));
  EXPECT_TRUE(absl::IsFailedPrecondition(StartEpoch(job, 3)));
  GetOrCreateJobRequest other;
  other.set_dataset_id(RegisterRangeDataset(20, 5));
  other.set_name("j");
  GetOrCreateJobResponse ignored;
  EXPECT_THAT(std::string(impl_->GetOrCreateJob(other, &ignored).message()),
              HasSubstr("job 'j' exists"));
  RegisterDatasetRequest bad;
  auto bad_def = ParsePipelineJson(
      R"({"source": {"type": "range", "params": {"stop": 5}}, "ops": [{"op": "shuffel"}]})", "p");
  ASSERT_TRUE(bad_def.ok());
  *bad.mutable_pipeline() = *bad_def;
  RegisterDatasetResponse bad_response;
  const absl::Status invalid = impl_->RegisterDataset(bad, &bad_response);
  EXPECT_TRUE(absl::IsInvalidArgument(invalid));
  EXPECT_THAT(std::string(invalid.message()), HasSubstr("op 0 (shuffel): unknown op"));
  // The cache's ops are the dispatcher's to insert.
  bad.mutable_pipeline()->mutable_ops(0)->set_op("cache_write");
  const absl::Status inserted = impl_->RegisterDataset(bad, &bad_response);
  EXPECT_TRUE(absl::IsInvalidArgument(inserted));
  EXPECT_THAT(std::string(inserted.message()),
              HasSubstr("op 0 (cache_write) is inserted by the dispatcher"));
  bad.mutable_pipeline()->clear_ops();
  bad.mutable_pipeline()->mutable_source()->set_type("cache_read");
  EXPECT_THAT(std::string(impl_->RegisterDataset(bad, &bad_response).message()),
              HasSubstr("source cache_read (and cached_ops) are inserted by the dispatcher"));
  // A client heartbeat's `ended` counts only for tasks it reports, and never negative.
  ClientHeartbeatRequest ended;
  ended.set_job_id(job);
  ended.set_epoch(0);
  (*ended.mutable_ended())[1] = 4;
  ClientHeartbeatResponse ended_response;
  const absl::Status unreported = impl_->ClientHeartbeat(ended, &ended_response);
  EXPECT_TRUE(absl::IsInvalidArgument(unreported)) << unreported;
  EXPECT_THAT(std::string(unreported.message()),
              HasSubstr("task 1 ended with 4 elements: not one of the tasks it reports"));
  (*ended.mutable_next_index())[1] = 0;
  (*ended.mutable_ended())[1] = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(impl_->ClientHeartbeat(ended, &ended_response)));
  WorkerHeartbeatRequest stale;
  stale.set_worker_id("a");
  stale.set_incarnation(7);
  WorkerHeartbeatResponse hb;
  EXPECT_TRUE(absl::IsFailedPrecondition(impl_->WorkerHeartbeat(stale, &hb)));
}

TEST_F(DispatcherImplTest, HostileCountsAreRefusedBeforeAnythingIsJournaled) {
  // Issue 13, defect 1: this request, then StartEpoch, bricked the dispatcher for good.
  Open();
  RegisterWorker("a");
  const std::string dataset = RegisterRangeDataset(10, 5);
  const std::string before = State();
  GetOrCreateJobRequest request;
  request.set_dataset_id(dataset);
  request.mutable_options()->set_num_consumers(2147483647);
  request.mutable_options()->set_num_worker_slots(2147483647);
  GetOrCreateJobResponse response;
  absl::Status status = impl_->GetOrCreateJob(request, &response);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("num_consumers is 2147483647"));
  request.mutable_options()->set_num_consumers(4096);
  request.mutable_options()->set_num_worker_slots(4096);
  status = impl_->GetOrCreateJob(request, &response);
  EXPECT_THAT(std::string(status.message()), HasSubstr("16777216 tasks per epoch"));
  request.mutable_options()->set_num_consumers(1);
  request.mutable_options()->set_num_worker_slots(1);
  request.set_name(std::string(5000, 'n'));
  status = impl_->GetOrCreateJob(request, &response);
  EXPECT_THAT(std::string(status.message()), HasSubstr("job name has 5000 bytes"));
  EXPECT_TRUE(State() == before) << "a refused request journals nothing";
  Open();
  EXPECT_TRUE(State() == before) << "and the restarted dispatcher is in the same state";
}

TEST_F(DispatcherImplTest, IdleFinishedJobsAreRetiredAfterTheRetentionPeriod) {
  Open();
  RegisterWorker("a");
  const std::string dataset = RegisterRangeDataset(10, 5);
  const int64_t done = CreateJob(dataset, "done", 1, 1);
  const int64_t running = CreateJob(dataset, "running", 1, 1);
  const int64_t idle_but_read = CreateJob(dataset, "active", 1, 1);
  for (int64_t job : {done, running, idle_but_read}) ASSERT_TRUE(StartEpoch(job, 0).ok());
  // Tasks 1 and 3 finish; task 2 (job "running") does not.
  for (int64_t task : {1, 3}) {
    TaskFinishedRequest finished;
    finished.set_task_id(task);
    finished.set_generation(1);
    finished.set_num_elements(10);
    TaskFinishedResponse ignored;
    ASSERT_TRUE(impl_->TaskFinished(finished, &ignored).ok());
  }
  clock_.AdvanceMicros(kRetentionMs * 1000 + 1);
  ClientHeartbeatRequest hb;
  hb.set_job_id(idle_but_read);
  hb.set_epoch(0);
  hb.set_consumer(0);
  ClientHeartbeatResponse hb_response;
  ASSERT_TRUE(impl_->ClientHeartbeat(hb, &hb_response).ok());
  ASSERT_TRUE(impl_->RetireIdleJobs().ok());
  GetStatusResponse status;
  ASSERT_TRUE(impl_->GetStatus({}, &status).ok());
  std::set<int64_t> jobs;
  for (const JobState& job : status.state().jobs()) jobs.insert(job.job_id());
  EXPECT_EQ(jobs, (std::set<int64_t>{running, idle_but_read}))
      << "only the finished job nobody asked about is retired";
  for (const TaskState& task : status.state().tasks()) EXPECT_NE(task.job_id(), done);
  const std::string retired = State();
  Open();
  EXPECT_TRUE(State() == retired) << "the retirement is journaled";
  // Its name is free again: a new job with epochs from 0.
  EXPECT_GT(CreateJob(dataset, "done", 1, 1), idle_but_read);
}

// Issue 19: what the status page and /metrics show of a running job.
TEST_F(DispatcherImplTest, StatusSummaryAndMetricsShowTheRunningJob) {
  Open();
  RegisterWorker("w1");
  RegisterWorker("w2");
  const std::string dataset = RegisterRangeDataset(100, 10);
  const int64_t job = CreateJob(dataset, "metered", 1, 2);
  ASSERT_TRUE(StartEpoch(job, 0).ok());
  GetStatusResponse full;
  ASSERT_TRUE(impl_->GetStatus({}, &full).ok());
  ASSERT_EQ(full.state().tasks_size(), 2);
  const TaskState task = full.state().tasks(0);
  ASSERT_TRUE(Splits(task.task_id(), 0, 3).ok());

  // The worker says what it produced, the trainer what it got, twice one second apart.
  WorkerHeartbeatRequest worker_hb;
  worker_hb.set_worker_id(task.worker_id());
  worker_hb.set_incarnation(1);
  RunningTask* running = worker_hb.add_running();
  running->set_task_id(task.task_id());
  running->set_generation(task.generation());
  running->set_produced(40);
  running->set_busy_us(1000);
  running->set_transport("tcp");
  WorkerHeartbeatResponse worker_hb_response;
  ASSERT_TRUE(impl_->WorkerHeartbeat(worker_hb, &worker_hb_response).ok());
  for (const int64_t delivered : {30, 50}) {
    ClientHeartbeatRequest hb;
    hb.set_job_id(job);
    hb.set_epoch(0);
    hb.set_consumer(0);
    (*hb.mutable_next_index())[task.task_id()] = delivered;
    hb.set_delivered(delivered);
    hb.set_wait_us(delivered * 100);
    hb.set_step_us(delivered * 1000);
    ClientHeartbeatResponse ignored;
    ASSERT_TRUE(impl_->ClientHeartbeat(hb, &ignored).ok());
    if (delivered == 30) clock_.AdvanceMicros(1000000);
  }

  GetStatusRequest summary_request;
  summary_request.set_summary(true);
  GetStatusResponse summary;
  ASSERT_TRUE(impl_->GetStatus(summary_request, &summary).ok());
  ASSERT_EQ(summary.state().epochs_size(), 1);
  EXPECT_EQ(summary.state().epochs(0).plan_size(), 0) << "the summary leaves the plan out";
  EXPECT_TRUE(summary.state().datasets(0).pipeline().source().type().empty());
  ASSERT_EQ(summary.epoch_progress_size(), 1);
  EXPECT_EQ(summary.epoch_progress(0).splits(), 10);
  EXPECT_EQ(summary.epoch_progress(0).leased(), 3);
  ASSERT_EQ(summary.task_activity_size(), 2);
  const TaskActivity& activity = summary.task_activity(0);
  EXPECT_EQ(activity.task_id(), task.task_id());
  EXPECT_EQ(activity.leased_splits(), 3);
  EXPECT_EQ(activity.produced(), 40);
  EXPECT_EQ(activity.delivered(), 50);
  EXPECT_EQ(activity.transport(), "tcp");
  ASSERT_EQ(summary.job_activity_size(), 1);
  EXPECT_EQ(summary.job_activity(0).delivered(), 50);
  EXPECT_EQ(summary.job_activity(0).wait_us(), 5000);
  EXPECT_DOUBLE_EQ(summary.job_activity(0).elements_per_second(), 20);  // 50 - 30 in 1 s
  EXPECT_DOUBLE_EQ(summary.job_activity(0).wait_seconds_per_element(), 100e-6);

  // /metrics: the same, plus the journal's own instruments; after a worker is lost, its task
  // counts as moved.
  metrics_.AddCollector([this](MetricSamples& out) {
    if (impl_ != nullptr) impl_->CollectMetrics(out);
  });
  absl::StatusOr<Exposition> scraped = ParseExposition(metrics_.RenderText());
  ASSERT_TRUE(scraped.ok()) << scraped.status();
  const std::map<std::string, std::string> job_label = {{"job", absl::StrCat(job)}};
  EXPECT_EQ(scraped->Sum("granary_job_elements_delivered_total", job_label), 50);
  EXPECT_DOUBLE_EQ(scraped->Sum("granary_job_trainer_wait_seconds_total", job_label), 0.005);
  EXPECT_EQ(scraped->Sum("granary_job_slots_per_consumer",
                         {{"job", absl::StrCat(job)}, {"kind", "remote"}}),
            2);
  EXPECT_EQ(scraped->Sum("granary_dispatcher_epochs_started_total", {{"cache", "compute"}}), 1);
  EXPECT_EQ(scraped->Sum("granary_dispatcher_workers", {{"state", "live"}}), 2);
  EXPECT_EQ(scraped->Sum("granary_dispatcher_running_tasks", {{"assigned", "yes"}}), 2);
  EXPECT_EQ(scraped->Sum("granary_dispatcher_tasks_moved_total"), 0);
  EXPECT_GE(scraped->Sum("granary_journal_appends_total"), 6);  // cluster id, 2 workers, ...
  EXPECT_EQ(scraped->Sum("granary_journal_applied_seq"), summary.state().applied_seq());
  LoseWorker(task.worker_id());
  scraped = ParseExposition(metrics_.RenderText());
  ASSERT_TRUE(scraped.ok()) << scraped.status();
  EXPECT_EQ(scraped->Sum("granary_dispatcher_tasks_moved_total"), 1);
  EXPECT_EQ(scraped->Sum("granary_dispatcher_workers", {{"state", "lost"}}), 1);
}

// Issue 20: GetOrCreateJob tells which cache the job's next epoch would use, and its state.
TEST_F(DispatcherImplTest, OpeningAJobTellsTheCacheItsNextEpochWouldUse) {
  Open(10000, dir_.path() + "/cache");
  RegisterWorker("w");
  const std::string dataset = RegisterRangeDataset(100, 10);
  GetOrCreateJobRequest request;
  request.set_dataset_id(dataset);
  request.set_name("cached");
  request.mutable_options()->set_seed(3);
  request.mutable_options()->set_num_consumers(1);
  request.mutable_options()->set_cache_policy(CACHE_FULL);
  GetOrCreateJobResponse opened;
  ASSERT_TRUE(impl_->GetOrCreateJob(request, &opened).ok());
  EXPECT_FALSE(opened.cache_key().empty());
  EXPECT_FALSE(opened.has_cache()) << "no cache yet: the next epoch puts it";
  EXPECT_EQ(opened.epochs_started(), 0);
  ASSERT_TRUE(StartEpoch(opened.job_id(), 0).ok());
  GetOrCreateJobResponse again;
  ASSERT_TRUE(impl_->GetOrCreateJob(request, &again).ok());
  EXPECT_EQ(again.cache_key(), opened.cache_key());
  ASSERT_TRUE(again.has_cache());
  EXPECT_FALSE(again.cache().complete());
  EXPECT_EQ(again.cache().put_job_id(), opened.job_id());
  EXPECT_EQ(again.cache().put_epoch(), 0);
  EXPECT_EQ(again.epochs_started(), 1);
  // A job that does not cache names no cache.
  request.set_name("computed");
  request.mutable_options()->set_cache_policy(CACHE_COMPUTE);
  GetOrCreateJobResponse computed;
  ASSERT_TRUE(impl_->GetOrCreateJob(request, &computed).ok());
  EXPECT_TRUE(computed.cache_key().empty());
}

// Records the counts it is asked for.
class RecordingProvisioner : public Provisioner {
 public:
  explicit RecordingProvisioner(std::vector<int32_t>* asked) : asked_(asked) {}
  absl::Status Resize(int32_t count, const std::vector<std::string>& idle) override {
    asked_->push_back(count);
    return absl::OkStatus();
  }
  std::string Describe() const override { return "recording"; }

 private:
  std::vector<int32_t>* const asked_;
};

TEST_F(DispatcherImplTest, StandbyWorkersAreNoSurplusForTheProvisioner) {
  // A standby is not the provisioner's to stop (a StatefulSet of its own on Kubernetes): counted
  // as a surplus worker, it made the provisioner ask for the same count every few periods.
  Open();
  std::vector<int32_t> asked;
  impl_->SetProvisioner(std::make_unique<RecordingProvisioner>(&asked), 1, 4);
  const int64_t remote = RegisterWorker("remote-0");
  const int64_t standby = RegisterWorker("standby-0", /*standby=*/true);
  // 30 steps of 0.9 s (under the failure detector's timeout): 27 s, many policy periods.
  for (int step = 0; step < 30; ++step) {
    for (const auto& [id, incarnation] : {std::pair<std::string, int64_t>{"remote-0", remote},
                                          std::pair<std::string, int64_t>{"standby-0", standby}}) {
      WorkerHeartbeatRequest hb;
      hb.set_worker_id(id);
      hb.set_incarnation(incarnation);
      WorkerHeartbeatResponse ignored;
      ASSERT_TRUE(impl_->WorkerHeartbeat(hb, &ignored).ok());
    }
    impl_->Provision();
    clock_.AdvanceMicros(900 * 1000);
  }
  EXPECT_EQ(asked, std::vector<int32_t>{1}) << "asked once, for --min_workers";
}

TEST_F(DispatcherImplTest, HeartbeatsSendEachPipelineOnceAndOnlyNewTaskDefinitions) {
  // Issue 13, defect 3: every heartbeat answer carried the full pipeline of every task the
  // worker held; past gRPC's 4 MiB message limit the worker could no longer learn its tasks.
  Open();
  RegisterWorker("a");
  // Two datasets whose pipelines (a mark with a long name) are 10 MB each, two epochs each.
  std::vector<int64_t> jobs;
  for (char c : {'x', 'y'}) {
    auto def =
        ParsePipelineJson(absl::StrCat(R"({"source": {"type": "range", "params": {"stop": 10, )",
                                       R"("elements_per_split": 5}}, "ops": [)",
                                       R"({"op": "mark", "params": {"name": ")",
                                       std::string(10 << 20, c), R"("}}]})"),
                          "big.json");
    ASSERT_TRUE(def.ok()) << def.status();
    RegisterDatasetRequest request;
    *request.mutable_pipeline() = *def;
    RegisterDatasetResponse response;
    ASSERT_TRUE(impl_->RegisterDataset(request, &response).ok());
    jobs.push_back(CreateJob(response.dataset_id(), std::string(1, c), 2, 1));
    ASSERT_TRUE(StartEpoch(jobs.back(), 0).ok());
  }
  WorkerHeartbeatRequest request;
  request.set_worker_id("a");
  request.set_incarnation(1);
  WorkerHeartbeatResponse first;
  ASSERT_TRUE(impl_->WorkerHeartbeat(request, &first).ok());
  EXPECT_EQ(first.assigned_task_ids_size(), 4);
  // The pipeline budget holds one of the two: the other dataset's tasks come next time.
  EXPECT_TRUE(first.more());
  ASSERT_EQ(first.tasks_size(), 2);
  EXPECT_TRUE(first.tasks(0).has_pipeline());
  EXPECT_FALSE(first.tasks(1).has_pipeline()) << "sent once per answer";
  EXPECT_EQ(first.tasks(0).pipeline_key(), first.tasks(1).pipeline_key());
  EXPECT_LT(first.ByteSizeLong(), 11u << 20);
  // What a worker does with an answer: hold its pipeline and run its tasks.
  const auto hold_and_run = [&request](const WorkerHeartbeatResponse& answer) {
    request.add_pipeline_keys(answer.tasks(0).pipeline_key());
    for (const TaskDef& def : answer.tasks()) {
      RunningTask* running = request.add_running();
      running->set_task_id(def.task_id());
      running->set_generation(def.generation());
    }
  };
  hold_and_run(first);
  WorkerHeartbeatResponse second;
  ASSERT_TRUE(impl_->WorkerHeartbeat(request, &second).ok());
  EXPECT_FALSE(second.more());
  ASSERT_EQ(second.tasks_size(), 2) << "only the definitions the worker lacks";
  EXPECT_TRUE(second.tasks(0).has_pipeline());
  EXPECT_NE(second.tasks(0).pipeline_key(), first.tasks(0).pipeline_key());
  hold_and_run(second);
  WorkerHeartbeatResponse steady;
  ASSERT_TRUE(impl_->WorkerHeartbeat(request, &steady).ok());
  EXPECT_EQ(steady.tasks_size(), 0);
  EXPECT_EQ(steady.assigned_task_ids_size(), 4);
  EXPECT_LT(steady.ByteSizeLong(), 64u) << "the steady state costs a few bytes per task";
}

TEST_F(DispatcherImplTest, AWorkerHoldingAPipelineAsWrittenIsSentItForAJobWithAutoOrder) {
  // The worker runs an auto_order job's pipeline reordered: the key names that, so a worker
  // holding the dataset's pipeline for a job without auto_order still gets it (it had no
  // pipeline to reorder, and its heartbeats failed: every task it was given stalled).
  Open();
  RegisterWorker("a");
  const std::string dataset = RegisterRangeDataset(10, 5);
  const int64_t as_written = CreateJob(dataset, "as-written");
  ASSERT_TRUE(StartEpoch(as_written, 0).ok());
  WorkerHeartbeatRequest request;
  request.set_worker_id("a");
  request.set_incarnation(1);
  const auto heartbeat = [this, &request] {
    WorkerHeartbeatResponse response;
    EXPECT_TRUE(impl_->WorkerHeartbeat(request, &response).ok());
    return response;
  };
  const WorkerHeartbeatResponse first = heartbeat();
  ASSERT_GT(first.tasks_size(), 0);
  ASSERT_TRUE(first.tasks(0).has_pipeline());
  request.add_pipeline_keys(first.tasks(0).pipeline_key());

  const int64_t reordered = CreateJob(dataset, "reordered", 1, 0,
                                      [](JobOptions* options) { options->set_auto_order(true); });
  ASSERT_TRUE(StartEpoch(reordered, 0).ok());
  const WorkerHeartbeatResponse second = heartbeat();
  int reordered_tasks = 0;
  for (const TaskDef& def : second.tasks()) {
    if (def.job_id() != reordered) continue;
    EXPECT_TRUE(def.auto_order()) << "task " << def.task_id();
    EXPECT_NE(def.pipeline_key(), first.tasks(0).pipeline_key()) << "task " << def.task_id();
    // Sent once per answer, with its first task.
    EXPECT_EQ(def.has_pipeline(), reordered_tasks == 0) << "task " << def.task_id();
    ++reordered_tasks;
  }
  EXPECT_GT(reordered_tasks, 0);
}

// Parameter ranges and file patterns are checked at registration, with PipelineSpec::Create's
// message, not when an epoch starts (issue 13, defect 12).
TEST_F(DispatcherImplTest, RegisterDatasetRefusesOutOfRangeParamsAndMissingFiles) {
  Open();
  const auto register_json = [&](const std::string& json) {
    auto def = ParsePipelineJson(json, "p.json");
    EXPECT_TRUE(def.ok()) << def.status();
    RegisterDatasetRequest request;
    *request.mutable_pipeline() = *def;
    RegisterDatasetResponse response;
    return impl_->RegisterDataset(request, &response);
  };
  const absl::Status batch = register_json(
      R"({"source": {"type": "range", "params": {"stop": 5}},
          "ops": [{"op": "batch", "params": {"batch_size": 0}}]})");
  EXPECT_TRUE(absl::IsInvalidArgument(batch)) << batch;
  EXPECT_THAT(std::string(batch.message()),
              HasSubstr("invalid pipeline: op 0 (batch): param 'batch_size' must be at least 1"));
  const absl::Status files = register_json(
      R"({"source": {"type": "tfrecord", "params": {"files": ["/nonexistent/granary/*.rec"]}}})");
  EXPECT_TRUE(absl::IsNotFound(files)) << files;
  EXPECT_THAT(std::string(files.message()),
              HasSubstr("source tfrecord: pattern '/nonexistent/granary/*.rec' matches no file"));
  GetStatusResponse status;
  ASSERT_TRUE(impl_->GetStatus({}, &status).ok());
  EXPECT_EQ(status.state().datasets_size(), 0) << "nothing refused is journaled";
  // A dataset already registered is not checked again: its files may have gone while a
  // complete cache serves it.
  const std::string lines = dir_.path() + "/lines.txt";
  ASSERT_TRUE(WriteStringToFile(Env::Default(), lines, "a\nb\n", false).ok());
  const std::string text_json = absl::StrCat(
      R"({"source": {"type": "text_lines", "params": {"files": [")", lines, R"("]}}})");
  EXPECT_TRUE(register_json(text_json).ok());
  ASSERT_TRUE(Env::Default()->RenameFile(lines, lines + ".moved").ok());
  EXPECT_TRUE(register_json(text_json).ok());
}

TEST_F(DispatcherImplTest, AJournalNamesItsClusterOnceAndWorkersLearnIt) {
  // Issue 13, defect 4: task ids start at 1 again in a new journal, so workers need the
  // journal's identity to keep one cluster's checkpoints from another's tasks.
  Open();
  RegisterWorkerRequest request;
  request.set_worker_id("a");
  request.set_address("a:1");
  RegisterWorkerResponse first;
  ASSERT_TRUE(impl_->RegisterWorker(request, &first).ok());
  EXPECT_EQ(first.cluster_id().size(), 32u) << first.cluster_id();
  Open();
  RegisterWorkerResponse after_restart;
  ASSERT_TRUE(impl_->RegisterWorker(request, &after_restart).ok());
  EXPECT_EQ(after_restart.cluster_id(), first.cluster_id()) << "journaled: kept across restarts";
  impl_.reset();
  std::filesystem::remove_all(dir_.path() + "/journal");
  Open();
  RegisterWorkerResponse fresh;
  ASSERT_TRUE(impl_->RegisterWorker(request, &fresh).ok());
  EXPECT_NE(fresh.cluster_id(), first.cluster_id()) << "a new journal is a new cluster";
}

TEST_F(DispatcherImplTest, NamedJobsAreSharedAndDatasetsDeduplicated) {
  Open();
  const std::string d1 = RegisterRangeDataset(10, 5);
  const std::string d2 = RegisterRangeDataset(10, 5);
  EXPECT_EQ(d1, d2);
  EXPECT_EQ(CreateJob(d1, "shared"), CreateJob(d1, "shared"));
  EXPECT_NE(CreateJob(d1, ""), CreateJob(d1, ""));
}

}  // namespace
}  // namespace granary
