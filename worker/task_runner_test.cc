// TaskRunner against an in-process dispatcher that leases a range pipeline's splits.
#include "worker/task_runner.h"

#include <chrono>
#include <thread>

#include "cache/cache_ops.h"
#include "checkpoint/checkpoint_store.h"
#include "common/env_wrapper.h"
#include "common/hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/core/udf.h"
#include "pipeline/pipeline_loader.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

// Leases the epoch's splits in enumeration order; records each TaskFinished.
class FakeDispatcher : public DispatcherConnection {
 public:
  explicit FakeDispatcher(std::vector<Split> splits) : splits_(std::move(splits)) {}

  absl::StatusOr<RegisterWorkerResponse> RegisterWorker(const RegisterWorkerRequest&) override {
    return absl::UnimplementedError("RegisterWorker");
  }
  absl::StatusOr<WorkerHeartbeatResponse> WorkerHeartbeat(const WorkerHeartbeatRequest&) override {
    return absl::UnimplementedError("WorkerHeartbeat");
  }
  absl::StatusOr<GetSplitsResponse> GetSplits(const GetSplitsRequest& request) override {
    GetSplitsResponse response;
    int64_t seq = request.from_seq();
    for (; seq < static_cast<int64_t>(splits_.size()) && seq < request.from_seq() + request.max();
         ++seq) {
      *response.add_splits() = splits_[seq];
    }
    response.set_end_of_splits(seq >= static_cast<int64_t>(splits_.size()));
    return response;
  }
  absl::Status TaskFinished(const TaskFinishedRequest&) override { return absl::OkStatus(); }
  absl::StatusOr<RecomputeCacheChunkResponse> RecomputeCacheChunk(
      const RecomputeCacheChunkRequest&) override {
    return absl::UnimplementedError("RecomputeCacheChunk");
  }
  absl::StatusOr<ReportCacheProfileResponse> ReportCacheProfile(
      const ReportCacheProfileRequest&) override {
    return absl::UnimplementedError("ReportCacheProfile");
  }

 private:
  const std::vector<Split> splits_;
};

class TaskRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<PipelineDef> def = ParsePipelineJson(
        R"({"source": {"type": "range", "params": {"stop": 10, "elements_per_split": 3}}})",
        "task runner test pipeline");
    ASSERT_TRUE(def.ok()) << def.status();
    absl::StatusOr<std::unique_ptr<Pipeline>> pipeline =
        Pipeline::Create(*def, PipelineRegistriesWithCache());
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    pipeline_ = std::move(pipeline).value();
    absl::StatusOr<std::vector<Split>> splits = pipeline_->EnumerateSplits(Env::Default());
    ASSERT_TRUE(splits.ok()) << splits.status();
    dispatcher_ = std::make_unique<FakeDispatcher>(*splits);
    task_.set_task_id(7);
    task_.set_generation(1);
  }

  std::unique_ptr<TaskRunner> NewRunner(const TaskRunnerOptions& options = {}) {
    return std::make_unique<TaskRunner>(task_, pipeline_, dispatcher_.get(), options,
                                        [](int64_t, const std::vector<CacheChunk>&) {});
  }

  // Asks for the one element at `from` (restarting the task if `from` is below the window).
  void ReadOne(TaskRunner& runner, int64_t from) {
    GetElementsRequest request;
    request.set_task_id(task_.task_id());
    request.set_generation(task_.generation());
    request.set_from_index(from);
    request.set_max_bytes(1);
    ElementsReply reply;
    const absl::Status status = runner.GetElements(request, &reply);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_EQ(reply.elements.size(), 1u);
    EXPECT_EQ(reply.elements[0].index, from);
  }

  // One GetElements call.
  ElementsReply Get(TaskRunner& runner, int64_t from, int64_t max_bytes = 1 << 20) {
    GetElementsRequest request;
    request.set_task_id(task_.task_id());
    request.set_generation(task_.generation());
    request.set_from_index(from);
    request.set_max_bytes(max_bytes);
    ElementsReply reply;
    const absl::Status status = runner.GetElements(request, &reply);
    EXPECT_TRUE(status.ok()) << status;
    return reply;
  }

  // Waits until the runner's current run has ended (the whole task fits the default window).
  void AwaitFinished(TaskRunner& runner) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!runner.Status().finished() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(runner.Status().finished()) << "the run did not end within 30 s";
  }

  // Reads elements from `from` to the end of the task, acknowledging all of them; returns the
  // number of elements the task has.
  int64_t ReadToEnd(TaskRunner& runner, int64_t from) {
    while (true) {
      GetElementsRequest request;
      request.set_task_id(task_.task_id());
      request.set_generation(task_.generation());
      request.set_from_index(from);
      request.set_max_bytes(1 << 20);
      ElementsReply reply;
      const absl::Status status = runner.GetElements(request, &reply);
      EXPECT_TRUE(status.ok()) << status;
      if (!status.ok()) return -1;
      if (reply.end_of_task) return reply.num_elements;
      for (const ReplyElement& e : reply.elements) {
        EXPECT_EQ(e.index, from);
        ++from;
      }
    }
  }

  std::shared_ptr<const Pipeline> pipeline_;
  std::unique_ptr<FakeDispatcher> dispatcher_;
  TaskDef task_;
};

// The answer's elements are the window's images themselves (no copy per request), each with
// the XXH3 of its bytes, and decode to the task's stream in order.
TEST_F(TaskRunnerTest, AnswersShareTheWindowsImagesWithTheirChecksums) {
  std::unique_ptr<TaskRunner> runner = NewRunner();
  const ElementsReply first = Get(*runner, 0);
  ASSERT_FALSE(first.elements.empty());
  const ElementsReply again = Get(*runner, 0);
  ASSERT_FALSE(again.elements.empty());
  EXPECT_EQ(first.elements[0].image.get(), again.elements[0].image.get());
  for (size_t i = 0; i < again.elements.size(); ++i) {
    const ReplyElement& e = again.elements[i];
    EXPECT_EQ(e.index, static_cast<int64_t>(i));
    EXPECT_EQ(e.checksum, Hash3_64(e.image->bytes()));
    absl::StatusOr<Element> element = Element::FromImage(e.image);
    ASSERT_TRUE(element.ok()) << element.status();
    EXPECT_EQ(element->tensors[0].data<int64_t>()[0], static_cast<int64_t>(i));
  }
}

// A window of one byte holds one element: the producer waits for the client.
TEST_F(TaskRunnerTest, TheProducerWaitsWhileTheWindowIsFull) {
  TaskRunnerOptions options;
  options.window_bytes = 1;
  std::unique_ptr<TaskRunner> runner = NewRunner(options);
  ASSERT_EQ(Get(*runner, 0).elements.size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(runner->Status().produced(), 1) << "the window held element 0: no room for 1";
  ASSERT_EQ(Get(*runner, 1).elements.size(), 1u);
  EXPECT_LE(runner->Status().produced(), 2);
}

// A runner asked first for element 6 (a restarted worker) computes and discards 0..5, and says
// so once.
TEST_F(TaskRunnerTest, AFirstRequestPastTheStartRecomputesUpToIt) {
  std::unique_ptr<TaskRunner> runner = NewRunner();
  const ElementsReply reply = Get(*runner, 6);
  ASSERT_FALSE(reply.elements.empty());
  EXPECT_EQ(reply.elements[0].index, 6);
  EXPECT_EQ(reply.recomputed, 6);
  EXPECT_EQ(Get(*runner, 7).recomputed, 0);
}

TEST_F(TaskRunnerTest, FullyAcknowledgedOnlyAfterTheClientReadEverything) {
  std::unique_ptr<TaskRunner> runner = NewRunner();
  EXPECT_FALSE(runner->FullyAcknowledged());
  EXPECT_EQ(ReadToEnd(*runner, 0), 10);
  EXPECT_TRUE(runner->FullyAcknowledged());
}

// Issue 13 defect 10: a client resuming below the window restarts the task; until it has read
// the recomputed run to its end, the runner is not fully acknowledged — even once the run has
// ended — or the worker's heartbeat would drop it under the resuming reader.
TEST_F(TaskRunnerTest, RestartBelowTheWindowResetsTheAcknowledgement) {
  std::unique_ptr<TaskRunner> runner = NewRunner();
  ASSERT_EQ(ReadToEnd(*runner, 0), 10);
  ASSERT_TRUE(runner->FullyAcknowledged());

  // The client resumes from element 2 (say, its trainer restored an older saved position), and
  // the recomputed run ends while the client is still there.
  ReadOne(*runner, 2);
  AwaitFinished(*runner);
  EXPECT_FALSE(runner->FullyAcknowledged())
      << "the client acknowledged only elements 0 and 1 of the recomputed run";

  EXPECT_EQ(ReadToEnd(*runner, 2), 10);
  EXPECT_TRUE(runner->FullyAcknowledged());
}

// The same defect, seen by the checkpoint store: the recomputed run's checkpoints past the
// client's position are collected as if the client had acknowledged the old run's end.
TEST_F(TaskRunnerTest, RestartBelowTheWindowKeepsCheckpointsPastTheClient) {
  testing::ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<CheckpointStore>> store =
      CheckpointStore::Open(Env::Default(), dir.path(), CheckpointOptions{.keep = 100});
  ASSERT_TRUE(store.ok()) << store.status();
  TaskRunnerOptions options;
  options.checkpoints = store->get();
  options.checkpoint_interval_ms = 0;  // after every element
  {
    std::unique_ptr<TaskRunner> runner = NewRunner(options);
    ASSERT_EQ(ReadToEnd(*runner, 0), 10);
    ReadOne(*runner, 2);
    AwaitFinished(*runner);
  }  // Destroying the runner waits for its last checkpoint write and collection.
  // A worker restarting now, asked for element 5, restores from the checkpoint at 5.
  absl::StatusOr<Checkpoint> newest = (*store)->Newest(task_.task_id(), 5);
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(newest->index, 5);
}

// A clock an hour further on at every reading, without any time passing.
class HourPerReadingEnv : public EnvWrapper {
 public:
  HourPerReadingEnv() : EnvWrapper(Env::Default()) {}
  uint64_t NowMicros() override { return now_ += 3'600'000'000; }

 private:
  std::atomic<uint64_t> now_{0};
};

// Issue 13, layering: the checkpoint interval is measured on the Env's clock, so it can be tested
// without sleeping. Here an hour passes between any two readings: with an interval of a minute,
// the runner checkpoints after every element, though the test takes milliseconds.
TEST_F(TaskRunnerTest, CheckpointIntervalIsMeasuredOnTheEnvClock) {
  HourPerReadingEnv env;
  testing::ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<CheckpointStore>> store =
      CheckpointStore::Open(Env::Default(), dir.path(), CheckpointOptions{.keep = 100});
  ASSERT_TRUE(store.ok()) << store.status();
  TaskRunnerOptions options;
  options.env = &env;
  options.checkpoints = store->get();
  options.checkpoint_interval_ms = 60'000;
  {
    std::unique_ptr<TaskRunner> runner = NewRunner(options);
    ASSERT_EQ(ReadToEnd(*runner, 0), 10);
  }  // Destroying the runner waits for its last checkpoint write.
  // The last element's checkpoint is there (the client acknowledged everything, so the older ones
  // were collected); on a real clock a minute's interval would have written none.
  absl::StatusOr<Checkpoint> checkpoint = (*store)->Newest(task_.task_id(), 10);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->index, 10);
}

// The trainer-side tail (TrainerTailOffer): the runner decides at its first request whether the
// reader runs it, keeps that choice, and says so in every answer.
class TrainerTailRunnerTest : public TaskRunnerTest {
 protected:
  // An offer whose pipeline without the tail is a range pipeline of its own (the runner only
  // swaps pipelines; what the tail is does not matter here), counting its builds.
  TrainerTailOffer Offer(Tail when) {
    TrainerTailOffer offer;
    offer.when = when;
    offer.tail.add_steps()->set_label("op 3 (map, udf 'normalize')");
    offer.tail.set_batch_dims(1);
    offer.pipeline = [this]() -> absl::StatusOr<std::shared_ptr<const Pipeline>> {
      ++builds_;
      return pipeline_;
    };
    return offer;
  }
  std::unique_ptr<TaskRunner> NewRunnerWithTail(Tail when, const TaskRunnerOptions& options = {}) {
    return std::make_unique<TaskRunner>(
        task_, pipeline_, dispatcher_.get(), options,
        [](int64_t, const std::vector<CacheChunk>&) {}, nullptr, Offer(when));
  }
  ElementsReply GetFrom(TaskRunner& runner, int64_t from, uint64_t shm_session) {
    const GetElementsRequest request = Request(from, shm_session);
    ElementsReply reply;
    const absl::Status status = runner.GetElements(request, &reply);
    EXPECT_TRUE(status.ok()) << status;
    return reply;
  }
  GetElementsRequest Request(int64_t from, uint64_t shm_session, bool runs_tail = true) {
    GetElementsRequest request;
    request.set_task_id(task_.task_id());
    request.set_generation(task_.generation());
    request.set_from_index(from);
    request.set_max_bytes(1);
    request.set_shm_session(shm_session);
    request.set_runs_trainer_tail(runs_tail);
    return request;
  }
  int builds_ = 0;
};

TEST_F(TrainerTailRunnerTest, AutoLeavesTheTailToAReaderByBytesAndSaysSoInEveryAnswer) {
  std::unique_ptr<TaskRunner> runner = NewRunnerWithTail(TAIL_AUTO);
  const std::string tail = Offer(TAIL_AUTO).tail.SerializeAsString();
  EXPECT_EQ(GetFrom(*runner, 0, /*shm_session=*/0).trainer_tail, tail);
  // Kept for the runner's life, whatever later requests say.
  EXPECT_EQ(GetFrom(*runner, 1, /*shm_session=*/42).trainer_tail, tail);
  EXPECT_EQ(builds_, 1);
}

// An older reader, which does not run a tail, never gets elements without it: the first request
// decides for the tail on the worker; a later one, when the tail went to the first reader, is
// refused.
TEST_F(TrainerTailRunnerTest, AReaderThatDoesNotRunTheTailNeverGetsElementsWithoutIt) {
  std::unique_ptr<TaskRunner> old_first = NewRunnerWithTail(TAIL_CLIENT);
  ElementsReply reply;
  ASSERT_TRUE(old_first->GetElements(Request(0, 0, /*runs_tail=*/false), &reply).ok());
  EXPECT_EQ(reply.trainer_tail, "");
  EXPECT_EQ(builds_, 0);
  std::unique_ptr<TaskRunner> old_later = NewRunnerWithTail(TAIL_CLIENT);
  EXPECT_NE(GetFrom(*old_later, 0, 0).trainer_tail, "");
  ElementsReply refused;
  const absl::Status status = old_later->GetElements(Request(1, 0, /*runs_tail=*/false), &refused);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("give the job tail worker"));
}

TEST_F(TrainerTailRunnerTest, AutoKeepsTheTailForASharedMemoryReaderAndClientLeavesItAnyway) {
  std::unique_ptr<TaskRunner> shm = NewRunnerWithTail(TAIL_AUTO);
  EXPECT_EQ(GetFrom(*shm, 0, /*shm_session=*/42).trainer_tail, "");
  EXPECT_EQ(GetFrom(*shm, 1, /*shm_session=*/0).trainer_tail, "");
  EXPECT_EQ(builds_, 0);
  std::unique_ptr<TaskRunner> client = NewRunnerWithTail(TAIL_CLIENT);
  EXPECT_NE(GetFrom(*client, 0, /*shm_session=*/42).trainer_tail, "");
  EXPECT_EQ(builds_, 1);
}

// A checkpoint says which pipeline took it: a run with the tail never restores one taken without
// it (its prefetch buffer would hold elements the tail has not run on), nor the other way round.
TEST_F(TrainerTailRunnerTest, ARunRestoresOnlyCheckpointsOfItsOwnSideOfTheTail) {
  testing::ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<CheckpointStore>> store =
      CheckpointStore::Open(Env::Default(), dir.path(), CheckpointOptions{.keep = 100});
  ASSERT_TRUE(store.ok()) << store.status();
  TaskRunnerOptions options;
  options.checkpoints = store->get();
  options.checkpoint_interval_ms = 0;  // after every element
  {
    std::unique_ptr<TaskRunner> without_tail = NewRunnerWithTail(TAIL_CLIENT, options);
    for (int64_t i = 0; i < 6; ++i) GetFrom(*without_tail, i, 0);
  }  // Destroying the runner waits for its last checkpoint write.
  ASSERT_TRUE((*store)->Newest(task_.task_id(), 5).ok());
  {
    // (Reading the store only: its own checkpoints would replace those under test.)
    TaskRunnerOptions reading = options;
    reading.checkpoint_interval_ms = 3'600'000;
    std::unique_ptr<TaskRunner> with_tail = NewRunner(reading);
    EXPECT_EQ(GetFrom(*with_tail, 5, 0).elements.at(0).index, 5);
    EXPECT_EQ(with_tail->Status().restored_from(), -1);
    EXPECT_EQ(with_tail->Status().recomputed(), 5);
  }
  std::unique_ptr<TaskRunner> again_without = NewRunnerWithTail(TAIL_CLIENT, options);
  EXPECT_EQ(GetFrom(*again_without, 5, 0).elements.at(0).index, 5);
  EXPECT_GE(again_without->Status().restored_from(), 0);
}

}  // namespace
}  // namespace granary
