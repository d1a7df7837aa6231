#include "checkpoint/checkpoint_store.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/fault_injection_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

std::string Name(int64_t task, int64_t index, int64_t generation) {
  return absl::StrFormat("task-%d-idx-%020d-gen-%d.ckpt", task, index, generation);
}

std::string State(int64_t task, int64_t index) { return absl::StrCat("state-", task, "@", index); }

class CheckpointStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { store_ = OpenStore(env_); }

  std::unique_ptr<CheckpointStore> OpenStore(Env* env, CheckpointOptions options = {}) {
    absl::StatusOr<std::unique_ptr<CheckpointStore>> store =
        CheckpointStore::Open(env, dir_.Join("ckpt"), options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  void Write(int64_t task, int64_t generation, int64_t index) {
    absl::StatusOr<int64_t> bytes = store_->Write(task, generation, index, State(task, index));
    ASSERT_TRUE(bytes.ok()) << bytes.status();
  }

  std::string Path(absl::string_view name) const { return dir_.Join("ckpt/" + std::string(name)); }

  std::vector<std::string> Files() const { return *Env::Default()->GetChildren(dir_.Join("ckpt")); }

  std::string ReadRaw(absl::string_view name) const {
    return *ReadFileToString(Env::Default(), Path(name));
  }
  void WriteRaw(absl::string_view name, absl::string_view data) const {
    ASSERT_TRUE(WriteStringToFile(Env::Default(), Path(name), data, /*sync=*/false).ok());
  }

  // Expects Newest(task, max_index) to be the checkpoint at `index` of `generation`.
  void ExpectNewest(int64_t task, int64_t max_index, int64_t index, int64_t generation,
                    std::vector<std::string>* skipped = nullptr) {
    absl::StatusOr<Checkpoint> c = store_->Newest(task, max_index, skipped);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->task_id, task);
    EXPECT_EQ(c->index, index);
    EXPECT_EQ(c->generation, generation);
    EXPECT_EQ(c->state, State(task, index));
    EXPECT_EQ(c->path, Path(Name(task, index, generation)));
  }

  testing::ScopedTempDir dir_;
  Env* env_ = Env::Default();
  std::unique_ptr<CheckpointStore> store_;
};

// --- Round trip and selection ---

TEST_F(CheckpointStoreTest, WriteThenNewestRoundTripsAndReturnsFileSize) {
  const std::string state("\0binary\xff state", 14);
  absl::StatusOr<int64_t> bytes = store_->Write(7, 2, 100, state);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, 8 + 40 + static_cast<int64_t>(state.size()) + 4);
  EXPECT_THAT(Files(), ElementsAre(Name(7, 100, 2)));
  EXPECT_EQ(*Env::Default()->GetFileSize(Path(Name(7, 100, 2))), static_cast<uint64_t>(*bytes));

  absl::StatusOr<Checkpoint> c = store_->Newest(7, 100);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->task_id, 7);
  EXPECT_EQ(c->generation, 2);
  EXPECT_EQ(c->index, 100);
  EXPECT_EQ(c->state, state);
  EXPECT_EQ(c->path, Path(Name(7, 100, 2)));
}

TEST_F(CheckpointStoreTest, EmptyStateRoundTrips) {
  ASSERT_TRUE(store_->Write(1, 0, 0, "").ok());
  absl::StatusOr<Checkpoint> c = store_->Newest(1, 0);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->state, "");
}

TEST_F(CheckpointStoreTest, DecodeCheckpointFileDecodesWhatWriteWroteAndNamesWhatIsWrong) {
  ASSERT_TRUE(store_->Write(7, 2, 100, "the state").ok());
  const std::string bytes = ReadRaw(Name(7, 100, 2));
  absl::StatusOr<Checkpoint> c = DecodeCheckpointFile(bytes, "f.ckpt");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->task_id, 7);
  EXPECT_EQ(c->generation, 2);
  EXPECT_EQ(c->index, 100);
  EXPECT_EQ(c->state, "the state");
  EXPECT_EQ(c->path, "f.ckpt");

  EXPECT_THAT(DecodeCheckpointFile("", "f.ckpt").status().message(),
              HasSubstr("checkpoint f.ckpt: truncated at byte 0"));
  EXPECT_THAT(DecodeCheckpointFile("GRNCKPT9", "f.ckpt").status().message(),
              HasSubstr("bad magic"));
  EXPECT_THAT(DecodeCheckpointFile(bytes.substr(0, bytes.size() - 1), "f.ckpt").status().message(),
              HasSubstr("truncated"));
  EXPECT_THAT(DecodeCheckpointFile(bytes + "x", "f.ckpt").status().message(),
              HasSubstr("1 trailing bytes"));
  std::string flipped = bytes;
  flipped[50] ^= 1;  // a byte of the state: a CRC mismatch
  EXPECT_THAT(DecodeCheckpointFile(flipped, "f.ckpt").status().message(),
              HasSubstr("CRC mismatch"));
  // A state length near 2^64 is "truncated", not an overflow.
  std::string huge = bytes;
  for (int i = 32; i < 40; ++i) huge[i] = '\xff';
  EXPECT_THAT(DecodeCheckpointFile(huge, "f.ckpt").status().message(), HasSubstr("truncated"));
}

TEST_F(CheckpointStoreTest, OpenCreatesMissingDirectoriesAndRejectsKeepBelowOne) {
  const std::string nested = dir_.Join("a/b/c");
  ASSERT_TRUE(CheckpointStore::Open(env_, nested).ok());
  EXPECT_TRUE(env_->FileExists(nested));
  EXPECT_TRUE(absl::IsInvalidArgument(
      CheckpointStore::Open(env_, nested, CheckpointOptions{.keep = 0}).status()));
}

TEST_F(CheckpointStoreTest, NegativeArgumentsAreInvalid) {
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Write(-1, 0, 0, "s").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Write(1, -1, 0, "s").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Write(1, 0, -1, "s").status()));
  EXPECT_THAT(Files(), IsEmpty());
}

TEST_F(CheckpointStoreTest, NewestPicksHighestIndexNotAboveMax) {
  Write(1, 0, 10);
  Write(1, 0, 20);
  Write(1, 0, 30);
  ExpectNewest(1, 1000, 30, 0);
  ExpectNewest(1, 30, 30, 0);
  ExpectNewest(1, 29, 20, 0);
  ExpectNewest(1, 20, 20, 0);
  ExpectNewest(1, 15, 10, 0);
  const absl::Status status = store_->Newest(1, 9).status();
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
}

TEST_F(CheckpointStoreTest, NewestOfUnknownTaskIsNotFound) {
  Write(1, 0, 10);
  EXPECT_TRUE(absl::IsNotFound(store_->Newest(2, 1000).status()));
  EXPECT_TRUE(absl::IsNotFound(store_->Newest(11, 1000).status()));  // "task-1" is a prefix
}

TEST_F(CheckpointStoreTest, NewestSpansGenerationsAndTasksAreSeparate) {
  Write(1, 0, 10);
  Write(1, 0, 20);
  Write(1, 3, 15);  // a later generation that restored from 10 and got to 15
  Write(12, 0, 25);
  ExpectNewest(1, 1000, 20, 0);
  ExpectNewest(1, 19, 15, 3);
  ExpectNewest(12, 1000, 25, 0);
  // Equal index: the higher generation wins.
  Write(1, 4, 20);
  ExpectNewest(1, 1000, 20, 4);
}

// --- Pruning and garbage collection ---

TEST_F(CheckpointStoreTest, WriteKeepsNewestK) {
  store_ = OpenStore(env_, CheckpointOptions{.keep = 2});
  for (int64_t i = 1; i <= 5; ++i) Write(1, 0, i * 10);
  Write(2, 0, 5);  // other tasks are not counted
  EXPECT_THAT(Files(), ElementsAre(Name(1, 40, 0), Name(1, 50, 0), Name(2, 5, 0)));
}

TEST_F(CheckpointStoreTest, WriteKeepsTheNewestAtOrBeforeTheAcknowledgedIndexToo) {
  // A worker a window ahead of its client: every new checkpoint is past the client's
  // acknowledged index 25, and 20 is the one a restarted run would restore from.
  store_ = OpenStore(env_, CheckpointOptions{.keep = 2});
  for (int64_t i = 1; i <= 6; ++i) {
    ASSERT_TRUE(store_->Write(1, 0, i * 10, State(1, i * 10), /*keep_at_or_before=*/25).ok());
  }
  EXPECT_THAT(Files(), ElementsAre(Name(1, 20, 0), Name(1, 50, 0), Name(1, 60, 0)));
  ExpectNewest(1, 25, 20, 0);
  // Once the client acknowledged 55, 20 goes: 50 is the newest at or before it.
  ASSERT_TRUE(store_->Write(1, 0, 70, State(1, 70), /*keep_at_or_before=*/55).ok());
  EXPECT_THAT(Files(), ElementsAre(Name(1, 50, 0), Name(1, 60, 0), Name(1, 70, 0)));
}

TEST_F(CheckpointStoreTest, WriteNeverPrunesWhatItJustWrote) {
  store_ = OpenStore(env_, CheckpointOptions{.keep = 2});
  Write(1, 0, 100);
  Write(1, 0, 200);
  Write(1, 1, 50);  // a new generation restored from below both
  EXPECT_THAT(Files(), ElementsAre(Name(1, 50, 1), Name(1, 100, 0), Name(1, 200, 0)));
  Write(1, 1, 60);  // now 50 is beyond the newest 2 and not just written
  EXPECT_THAT(Files(), ElementsAre(Name(1, 60, 1), Name(1, 100, 0), Name(1, 200, 0)));
}

TEST_F(CheckpointStoreTest, GarbageCollectKeepsNewestAtOrBelowAckAndAllNewer) {
  store_ = OpenStore(env_, CheckpointOptions{.keep = 10});
  for (int64_t i = 1; i <= 5; ++i) Write(1, 0, i * 10);
  Write(2, 0, 10);
  Write(2, 0, 20);
  ASSERT_TRUE(store_->GarbageCollect(1, 35).ok());
  EXPECT_THAT(Files(), ElementsAre(Name(1, 30, 0), Name(1, 40, 0), Name(1, 50, 0), Name(2, 10, 0),
                                   Name(2, 20, 0)));
  ASSERT_TRUE(store_->GarbageCollect(1, 40).ok());  // exactly at a checkpoint: that one stays
  EXPECT_THAT(Files(), ElementsAre(Name(1, 40, 0), Name(1, 50, 0), Name(2, 10, 0), Name(2, 20, 0)));
  ASSERT_TRUE(store_->GarbageCollect(1, 5).ok());  // below everything: nothing to do
  ASSERT_TRUE(store_->GarbageCollect(1, 1000).ok());
  EXPECT_THAT(Files(), ElementsAre(Name(1, 50, 0), Name(2, 10, 0), Name(2, 20, 0)));
  ExpectNewest(1, 1000, 50, 0);
}

TEST_F(CheckpointStoreTest, GarbageCollectKeepsTheNewestThatVerifies) {
  store_ = OpenStore(env_, CheckpointOptions{.keep = 10});
  Write(1, 0, 10);
  Write(1, 0, 20);
  Write(1, 0, 30);
  std::string data = ReadRaw(Name(1, 30, 0));
  data[data.size() / 2] ^= 0x01;
  WriteRaw(Name(1, 30, 0), data);
  ASSERT_TRUE(store_->GarbageCollect(1, 30).ok());
  EXPECT_THAT(Files(), ElementsAre(Name(1, 20, 0)));
}

TEST_F(CheckpointStoreTest, DeleteAllRemovesOnlyThatTaskIncludingTemporaries) {
  Write(1, 0, 10);
  Write(1, 1, 20);
  Write(2, 0, 10);
  WriteRaw(Name(1, 30, 1) + ".tmp-123-0", "partial");
  ASSERT_TRUE(store_->DeleteAll(1).ok());
  EXPECT_THAT(Files(), ElementsAre(Name(2, 10, 0)));
  EXPECT_TRUE(absl::IsNotFound(store_->Newest(1, 1000).status()));
  EXPECT_TRUE(store_->DeleteAll(1).ok());  // nothing left: still OK
}

// --- Corruption: one test per case ---

TEST_F(CheckpointStoreTest, AnotherOwnersCheckpointIsNeverRestored) {
  // Issue 13, defect 4: task ids start at 1 again with a fresh journal, and a restarted worker
  // restored another cluster's checkpoint of "its" task: the client got the wrong rows.
  CheckpointOptions old_cluster;
  old_cluster.owner = "cluster-old";
  store_ = OpenStore(env_, old_cluster);
  Write(1, 1, 10);
  Write(1, 1, 20);
  CheckpointOptions new_cluster;
  new_cluster.owner = "cluster-new";
  store_ = OpenStore(env_, new_cluster);
  std::vector<std::string> skipped;
  const absl::StatusOr<Checkpoint> restored = store_->Newest(1, 1000, &skipped);
  EXPECT_TRUE(absl::IsNotFound(restored.status())) << restored.status();
  EXPECT_EQ(skipped.size(), 2u);
  Write(1, 1, 5);
  ExpectNewest(1, 1000, 5, 1);
}

TEST_F(CheckpointStoreTest, FlippedByteIsSkippedForTheOlderOne) {
  Write(1, 0, 10);
  Write(1, 0, 20);
  std::string data = ReadRaw(Name(1, 20, 0));
  data[50] ^= 0x40;  // inside the state
  WriteRaw(Name(1, 20, 0), data);
  std::vector<std::string> skipped;
  ExpectNewest(1, 1000, 10, 0, &skipped);
  EXPECT_THAT(skipped, ElementsAre(Path(Name(1, 20, 0))));
}

TEST_F(CheckpointStoreTest, FlippedCrcByteIsSkipped) {
  Write(1, 0, 10);
  Write(1, 0, 20);
  std::string data = ReadRaw(Name(1, 20, 0));
  data.back() ^= 0x01;
  WriteRaw(Name(1, 20, 0), data);
  std::vector<std::string> skipped;
  ExpectNewest(1, 1000, 10, 0, &skipped);
  EXPECT_THAT(skipped, ElementsAre(Path(Name(1, 20, 0))));
}

TEST_F(CheckpointStoreTest, TruncatedFileIsSkipped) {
  Write(1, 0, 10);
  Write(1, 0, 20);
  const std::string data = ReadRaw(Name(1, 20, 0));
  WriteRaw(Name(1, 20, 0), data.substr(0, data.size() - 3));
  std::vector<std::string> skipped;
  ExpectNewest(1, 1000, 10, 0, &skipped);
  EXPECT_THAT(skipped, ElementsAre(Path(Name(1, 20, 0))));
}

TEST_F(CheckpointStoreTest, FileTruncatedInsideTheHeaderIsSkipped) {
  Write(1, 0, 10);
  Write(1, 0, 20);
  WriteRaw(Name(1, 20, 0), ReadRaw(Name(1, 20, 0)).substr(0, 12));
  std::vector<std::string> skipped;
  ExpectNewest(1, 1000, 10, 0, &skipped);
  EXPECT_THAT(skipped, ElementsAre(Path(Name(1, 20, 0))));
}

TEST_F(CheckpointStoreTest, EmptyFileIsSkipped) {
  Write(1, 0, 10);
  WriteRaw(Name(1, 20, 0), "");
  std::vector<std::string> skipped;
  ExpectNewest(1, 1000, 10, 0, &skipped);
  EXPECT_THAT(skipped, ElementsAre(Path(Name(1, 20, 0))));
}

TEST_F(CheckpointStoreTest, BadMagicIsSkipped) {
  Write(1, 0, 10);
  Write(1, 0, 20);
  std::string data = ReadRaw(Name(1, 20, 0));
  data[0] = 'X';
  WriteRaw(Name(1, 20, 0), data);
  std::vector<std::string> skipped;
  ExpectNewest(1, 1000, 10, 0, &skipped);
  EXPECT_THAT(skipped, ElementsAre(Path(Name(1, 20, 0))));
}

TEST_F(CheckpointStoreTest, TrailingBytesAreSkipped) {
  Write(1, 0, 10);
  Write(1, 0, 20);
  WriteRaw(Name(1, 20, 0), ReadRaw(Name(1, 20, 0)) + "xx");
  std::vector<std::string> skipped;
  ExpectNewest(1, 1000, 10, 0, &skipped);
  EXPECT_THAT(skipped, ElementsAre(Path(Name(1, 20, 0))));
}

TEST_F(CheckpointStoreTest, HeaderDisagreeingWithFileNameIsSkipped) {
  Write(1, 0, 10);
  Write(1, 0, 20);
  // An intact checkpoint of index 20 stored under the name of index 30.
  WriteRaw(Name(1, 30, 0), ReadRaw(Name(1, 20, 0)));
  std::vector<std::string> skipped;
  ExpectNewest(1, 1000, 20, 0, &skipped);
  EXPECT_THAT(skipped, ElementsAre(Path(Name(1, 30, 0))));
}

TEST_F(CheckpointStoreTest, StrayTemporaryIsNeverRead) {
  Write(1, 0, 10);
  // A complete, valid file of index 20, but still under its temporary name.
  const std::string temp = Name(1, 20, 0) + ".tmp-999-0";
  Write(1, 0, 20);
  ASSERT_TRUE(env_->RenameFile(Path(Name(1, 20, 0)), Path(temp)).ok());
  std::vector<std::string> skipped;
  ExpectNewest(1, 1000, 10, 0, &skipped);
  EXPECT_THAT(skipped, ElementsAre(Path(temp)));
}

TEST_F(CheckpointStoreTest, AllCorruptIsNotFoundAndReportsEveryFile) {
  Write(1, 0, 10);
  Write(1, 0, 20);
  WriteRaw(Name(1, 10, 0), "garbage");
  WriteRaw(Name(1, 20, 0), ReadRaw(Name(1, 20, 0)).substr(0, 30));
  std::vector<std::string> skipped;
  const absl::Status status = store_->Newest(1, 1000, &skipped).status();
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(skipped, UnorderedElementsAre(Path(Name(1, 10, 0)), Path(Name(1, 20, 0))));
}

// --- Failures and crashes (FaultInjectionEnv) ---

class CheckpointStoreFaultTest : public CheckpointStoreTest {
 protected:
  void SetUp() override {
    fault_env_ = std::make_unique<FaultInjectionEnv>(Env::Default());
    env_ = fault_env_.get();
    CheckpointStoreTest::SetUp();
  }
  std::unique_ptr<FaultInjectionEnv> fault_env_;
};

TEST_F(CheckpointStoreFaultTest, FailedFsyncFailsWriteNamingThePathAndLeavesNoFile) {
  Write(1, 0, 10);
  fault_env_->FailNextSyncs(1);
  const absl::StatusOr<int64_t> bytes = store_->Write(1, 0, 20, State(1, 20));
  ASSERT_FALSE(bytes.ok());
  EXPECT_THAT(std::string(bytes.status().message()), HasSubstr(Path(Name(1, 20, 0))));
  EXPECT_THAT(std::string(bytes.status().message()), HasSubstr("injected"));
  EXPECT_THAT(Files(), ElementsAre(Name(1, 10, 0)));  // no final file, no temporary
  ExpectNewest(1, 1000, 10, 0);
  // The next write succeeds.
  Write(1, 0, 20);
  ExpectNewest(1, 1000, 20, 0);
}

TEST_F(CheckpointStoreFaultTest, CheckpointSurvivesCrashAfterWriteReturnedOk) {
  Write(1, 0, 10);
  Write(1, 0, 20);
  ASSERT_TRUE(fault_env_->DropUnsyncedData().ok());
  EXPECT_THAT(Files(), ElementsAre(Name(1, 10, 0), Name(1, 20, 0)));
  std::vector<std::string> skipped;
  ExpectNewest(1, 1000, 20, 0, &skipped);
  EXPECT_THAT(skipped, IsEmpty());
}

TEST_F(CheckpointStoreFaultTest, WriteInterruptedBeforeRenameIsIgnored) {
  Write(1, 0, 10);
  // The interrupted write: a temporary was created and partly written, never synced nor
  // renamed. After the crash it is empty or gone; before it, it is partial. Either way Newest
  // never reads it.
  const std::string temp = Name(1, 20, 0) + ".tmp-4242-7";
  {
    absl::StatusOr<std::unique_ptr<WritableFile>> file = env_->NewWritableFile(Path(temp));
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE((*file)->Append("GRNCKPT2 partial").ok());
    ASSERT_TRUE((*file)->Close().ok());
  }
  std::vector<std::string> skipped;
  ExpectNewest(1, 1000, 10, 0, &skipped);
  EXPECT_THAT(skipped, ElementsAre(Path(temp)));
  ASSERT_TRUE(fault_env_->DropUnsyncedData().ok());
  EXPECT_THAT(Files(), ElementsAre(Name(1, 10, 0)));  // its creation was never made durable
  ExpectNewest(1, 1000, 10, 0);
}

// The crash model itself: what was not synced is lost.
TEST_F(CheckpointStoreFaultTest, DropUnsyncedDataTruncatesToTheLastSync) {
  const std::string path = Path("f");
  {
    absl::StatusOr<std::unique_ptr<WritableFile>> file = env_->NewWritableFile(path);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE((*file)->Append("durable").ok());
    ASSERT_TRUE((*file)->Sync().ok());
    ASSERT_TRUE((*file)->Append(" lost").ok());
    ASSERT_TRUE((*file)->Close().ok());
  }
  ASSERT_TRUE(env_->SyncDir(dir_.Join("ckpt")).ok());
  EXPECT_EQ(ReadRaw("f"), "durable lost");
  ASSERT_TRUE(fault_env_->DropUnsyncedData().ok());
  EXPECT_EQ(ReadRaw("f"), "durable");
}

TEST_F(CheckpointStoreFaultTest, DropUnsyncedDataUndoesRenameWithoutSyncDir) {
  {
    absl::StatusOr<std::unique_ptr<WritableFile>> file = env_->NewWritableFile(Path("a"));
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE((*file)->Append("x").ok());
    ASSERT_TRUE((*file)->Sync().ok());
    ASSERT_TRUE((*file)->Close().ok());
  }
  ASSERT_TRUE(env_->SyncDir(dir_.Join("ckpt")).ok());
  ASSERT_TRUE(env_->RenameFile(Path("a"), Path("b")).ok());
  ASSERT_TRUE(fault_env_->DropUnsyncedData().ok());
  EXPECT_THAT(Files(), ElementsAre("a"));
  EXPECT_EQ(ReadRaw("a"), "x");
}

TEST_F(CheckpointStoreFaultTest, DropUnsyncedDataDeletesFileWhoseCreationWasNotSynced) {
  {
    absl::StatusOr<std::unique_ptr<WritableFile>> file = env_->NewWritableFile(Path("new"));
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE((*file)->Append("x").ok());
    ASSERT_TRUE((*file)->Sync().ok());  // contents durable, directory entry not
    ASSERT_TRUE((*file)->Close().ok());
  }
  ASSERT_TRUE(fault_env_->DropUnsyncedData().ok());
  EXPECT_THAT(Files(), IsEmpty());
}

// --- Concurrency ---

TEST_F(CheckpointStoreTest, ConcurrentWritersOfDifferentTasks) {
  std::vector<std::thread> threads;
  for (int64_t task = 0; task < 4; ++task) {
    threads.emplace_back([this, task] {
      for (int64_t i = 1; i <= 20; ++i) {
        EXPECT_TRUE(store_->Write(task, 0, i, State(task, i)).ok());
        if (i % 5 == 0) {
          EXPECT_TRUE(store_->GarbageCollect(task, i - 2).ok());
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int64_t task = 0; task < 4; ++task) ExpectNewest(task, 1000, 20, 0);
  EXPECT_EQ(Files().size(), 4u * 3u);  // keep = 3 per task, no temporaries left
}

}  // namespace
}  // namespace granary
