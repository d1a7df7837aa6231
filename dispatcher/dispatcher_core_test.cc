// DispatcherCore: Propose journals, then applies in sequence; a refused update is never
// journaled; a built update applies to the state it was built on; a log failure stops the core
// (fail-stop) while a full log refuses one update; snapshots are written every snapshot_every
// records and recovered from; a follower applies records committed elsewhere in order, once
// each, and refuses a gap.
#include "dispatcher/dispatcher_core.h"

#include <map>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/deterministic_serialization.h"
#include "dispatcher/memory_log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

Update RegisterDataset(const std::string& id) {
  Update update;
  update.mutable_register_dataset()->set_dataset_id(id);
  return update;
}

class DispatcherCoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<DispatcherCore> Open(int64_t snapshot_every = 10000) {
    DispatcherCoreOptions options;
    options.snapshot_every = snapshot_every;
    options.check_invariants = true;
    return OpenMemoryCore(log_, options);
  }
  static uint64_t AppliedSeq(const DispatcherCore& core) {
    return core.Read([](const DispatcherState& state) { return state.applied_seq(); });
  }

  std::shared_ptr<LogContents> log_ = std::make_shared<LogContents>();
};

TEST_F(DispatcherCoreTest, ProposeJournalsThenAppliesAndThenSeesTheState) {
  std::unique_ptr<DispatcherCore> core = Open();
  bool seen = false;
  ASSERT_TRUE(core->Propose(RegisterDataset("d"),
                            [&](const DispatcherState& state) {
                              seen = state.FindDataset("d") != nullptr && state.applied_seq() == 1;
                            })
                  .ok());
  EXPECT_TRUE(seen);
  EXPECT_EQ(log_->size(), 1u);
  EXPECT_EQ(AppliedSeq(*core), 1u);
  EXPECT_TRUE(core->Read([](const DispatcherState& s) { return s.FindDataset("d") != nullptr; }));
}

TEST_F(DispatcherCoreTest, ConcurrentProposalsAreAppliedInSequenceOrder) {
  std::unique_ptr<DispatcherCore> core = Open();
  constexpr int kProposers = 8;
  std::vector<std::thread> proposers;
  for (int i = 0; i < kProposers; ++i) {
    proposers.emplace_back([&, i] {
      for (int j = 0; j < 10; ++j) {
        const absl::Status status = core->Propose(RegisterDataset(absl::StrCat(i, "-", j)));
        EXPECT_TRUE(status.ok()) << status;
      }
    });
  }
  for (std::thread& t : proposers) t.join();
  EXPECT_EQ(log_->size(), static_cast<size_t>(kProposers * 10));
  EXPECT_EQ(AppliedSeq(*core), static_cast<uint64_t>(kProposers * 10));
  // Replaying the log reaches the same state.
  const std::string before =
      core->Read([](const DispatcherState& s) { return SerializeDeterministically(s.ToProto()); });
  core.reset();
  core = Open();
  EXPECT_EQ(
      core->Read([](const DispatcherState& s) { return SerializeDeterministically(s.ToProto()); }),
      before);
}

TEST_F(DispatcherCoreTest, ABuiltUpdateAppliesToTheStateItWasBuiltOn) {
  // Each built update names its dataset after the datasets it sees: were two built on the same
  // state, or one on a state a concurrent record then changed, two would name the same dataset
  // and the second be refused.
  std::unique_ptr<DispatcherCore> core = Open();
  constexpr int kProposers = 4;
  constexpr int kEach = 20;
  std::vector<std::thread> proposers;
  for (int i = 0; i < kProposers; ++i) {
    proposers.emplace_back([&] {
      for (int j = 0; j < kEach; ++j) {
        const absl::Status status = core->Propose([](const DispatcherState& state) {
          return RegisterDataset(absl::StrCat("built-", state.datasets().size()));
        });
        EXPECT_TRUE(status.ok()) << status;
      }
    });
    proposers.emplace_back([&, i] {
      for (int j = 0; j < kEach; ++j) {
        const absl::Status status = core->Propose(RegisterDataset(absl::StrCat(i, "-", j)));
        EXPECT_TRUE(status.ok()) << status;
      }
    });
  }
  for (std::thread& t : proposers) t.join();
  EXPECT_EQ(AppliedSeq(*core), static_cast<uint64_t>(2 * kProposers * kEach));
}

TEST_F(DispatcherCoreTest, ABuildErrorOrARefusedBuiltUpdateIsNotJournaled) {
  std::unique_ptr<DispatcherCore> core = Open();
  ASSERT_TRUE(core->Propose(RegisterDataset("d")).ok());
  bool then_ran = false;
  const auto then = [&](const DispatcherState&) { then_ran = true; };
  EXPECT_EQ(core->Propose(
                    [](const DispatcherState&) -> absl::StatusOr<Update> {
                      return absl::AbortedError("nothing to build");
                    },
                    then)
                .code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(core->Propose([](const DispatcherState&) { return RegisterDataset("d"); }, then).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(then_ran);
  EXPECT_EQ(log_->size(), 1u);
  // Neither left the core waiting: the next proposals go through.
  ASSERT_TRUE(core->Propose(RegisterDataset("e")).ok());
  ASSERT_TRUE(
      core->Propose([](const DispatcherState&) { return RegisterDataset("f"); }, then).ok());
  EXPECT_TRUE(then_ran);
  EXPECT_EQ(AppliedSeq(*core), 3u);
}

TEST_F(DispatcherCoreTest, AnUpdateTheStateRefusesIsNotJournaled) {
  std::unique_ptr<DispatcherCore> core = Open();
  ASSERT_TRUE(core->Propose(RegisterDataset("d")).ok());
  bool then_ran = false;
  const absl::Status again =
      core->Propose(RegisterDataset("d"), [&](const DispatcherState&) { then_ran = true; });
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(then_ran);
  Update unknown_task;
  unknown_task.mutable_lease_splits()->set_task_id(7);
  EXPECT_EQ(core->Propose(unknown_task).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(core->Propose(Update()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(log_->size(), 1u);
  EXPECT_EQ(AppliedSeq(*core), 1u);
}

TEST_F(DispatcherCoreTest, ALogFailureStopsTheCoreWithTheFirstError) {
  std::unique_ptr<DispatcherCore> core = Open();
  ASSERT_TRUE(core->Propose(RegisterDataset("a")).ok());
  log_->FailAppends(absl::DataLossError("the disk broke"));
  const absl::Status failed = core->Propose(RegisterDataset("b"));
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.message(), HasSubstr("the disk broke"));
  // The log works again, but the core stays stopped, naming the first failure.
  log_->FailAppends(absl::OkStatus());
  const absl::Status later = core->Propose(RegisterDataset("c"));
  EXPECT_EQ(later.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(later.message(), HasSubstr("the disk broke"));
  EXPECT_EQ(core->CheckUsable().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(log_->size(), 1u);
  // Reads go on.
  EXPECT_EQ(AppliedSeq(*core), 1u);
}

TEST_F(DispatcherCoreTest, AFullLogRefusesOnlyThatUpdate) {
  std::unique_ptr<DispatcherCore> core = Open();
  log_->FailAppends(absl::UnavailableError("no space left"));
  EXPECT_EQ(core->Propose(RegisterDataset("a")).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(AppliedSeq(*core), 0u);
  log_->FailAppends(absl::OkStatus());
  EXPECT_TRUE(core->CheckUsable().ok());
  ASSERT_TRUE(core->Propose(RegisterDataset("a")).ok());
  EXPECT_EQ(AppliedSeq(*core), 1u);
}

TEST_F(DispatcherCoreTest, SnapshotsEverySnapshotEveryRecordsAndRecoversFromThem) {
  std::unique_ptr<DispatcherCore> core = Open(/*snapshot_every=*/2);
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(core->Propose(RegisterDataset(id)).ok());
  {
    absl::MutexLock lock(&log_->mu);
    EXPECT_EQ(log_->snapshot_seq, 2u);
  }
  core.reset();
  core = Open(/*snapshot_every=*/2);
  EXPECT_EQ(AppliedSeq(*core), 3u);
  EXPECT_EQ(core->Read([](const DispatcherState& s) { return s.datasets().size(); }), 3u);
}

TEST_F(DispatcherCoreTest, AwaitReturnsOnceTheStateSaysSoOrAtTheTimeout) {
  std::unique_ptr<DispatcherCore> core = Open();
  const auto has_d = [](const DispatcherState& s) { return s.FindDataset("d") != nullptr; };
  EXPECT_FALSE(core->Await(has_d, absl::Milliseconds(10)));
  std::thread proposer([&] { ASSERT_TRUE(core->Propose(RegisterDataset("d")).ok()); });
  EXPECT_TRUE(core->Await(has_d, absl::Seconds(30)));
  proposer.join();
}

TEST_F(DispatcherCoreTest, AFollowerAppliesCommittedRecordsInOrderOnceEach) {
  // The leader's core proposes; the follower's core is fed the records the leader committed.
  std::unique_ptr<DispatcherCore> leader = Open();
  auto follower_log = std::make_shared<LogContents>();
  std::unique_ptr<DispatcherCore> follower = OpenMemoryCore(follower_log);
  ASSERT_TRUE(leader->Propose(RegisterDataset("a")).ok());
  ASSERT_TRUE(leader->Propose(RegisterDataset("b")).ok());
  std::vector<std::string> records;
  {
    absl::MutexLock lock(&log_->mu);
    records = log_->records;
  }
  ASSERT_EQ(records.size(), 2u);
  ASSERT_TRUE(follower->ApplyCommitted(1, records[0]).ok());
  // Delivered twice: ignored, not applied again.
  ASSERT_TRUE(follower->ApplyCommitted(1, records[0]).ok());
  EXPECT_EQ(follower->applied_seq(), 1u);
  ASSERT_TRUE(follower->ApplyCommitted(2, records[1]).ok());
  EXPECT_EQ(follower->applied_seq(), 2u);
  EXPECT_TRUE(follower->Read([](const DispatcherState& s) {
    return s.FindDataset("a") != nullptr && s.FindDataset("b") != nullptr;
  }));
  // The follower's own log holds nothing: only a leader appends.
  EXPECT_EQ(follower_log->size(), 0u);
}

TEST_F(DispatcherCoreTest, AFollowerRefusesAGapAndARecordThatDoesNotParse) {
  std::unique_ptr<DispatcherCore> follower = Open();
  const std::string record = SerializeDeterministically(RegisterDataset("a"));
  const absl::Status gap = follower->ApplyCommitted(3, record);
  EXPECT_EQ(gap.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(gap.message(), HasSubstr("record 3 arrived after record 0"));
  const absl::Status garbage = follower->ApplyCommitted(1, "\xff not an update");
  EXPECT_EQ(garbage.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(garbage.message(), HasSubstr("memory log: record 1"));
  EXPECT_EQ(follower->applied_seq(), 0u);
}

TEST_F(DispatcherCoreTest, ARecordThatDoesNotParseIsDataLoss) {
  {
    absl::MutexLock lock(&log_->mu);
    log_->records.push_back("\xff not an update");
  }
  DispatcherCoreOptions options;
  const auto core = DispatcherCore::Open(std::make_unique<MemoryLog>(log_), options);
  EXPECT_EQ(core.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(core.status().message(), HasSubstr("memory log: record 1"));
}

}  // namespace
}  // namespace granary
