#include "cache/cache_put.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cache/cache_chunk_format.h"
#include "cache/cache_chunk_guard.h"
#include "cache/cache_ops.h"
#include "cache/cache_policy.h"
#include "common/env.h"
#include "common/fault_injection_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/core/element.h"
#include "pipeline/core/iterator_state.h"
#include "pipeline/pipeline.h"
#include "pipeline/core/split_provider.h"
#include "pipeline/core/tensor.h"
#include "pipeline/sources/tfrecord_reader.h"
#include "pipeline/sources/tfrecord_writer.h"
#include "pipeline/core/udf.h"
#include "proto/cache.pb.h"
#include "proto/pipeline.pb.h"
#include "security/chunk_mac.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;

constexpr int64_t kTask = 7;

// The chunk key of these tests' CachePuts.
ChunkMacKey TestKey() {
  return ChunkMacKey::Derive(CapabilityKey::FromBytes(std::string(32, 'c')).value());
}

// A new MAC, as FORMAT.md defines it, for chunk records `records` of task kTask from
// `first_index`.
std::string MacOf(int64_t first_index, const std::vector<std::string>& records) {
  ChunkMac mac = ChunkMac::ForNewChunk(TestKey(), kTask, first_index);
  for (const std::string& record : records) mac.Add(record);
  return mac.Finish();
}

// Whether `stored` is a MAC of chunk records `records` of task kTask from `first_index`.
bool MacHolds(int64_t first_index, const std::vector<std::string>& records,
              const std::string& stored) {
  ChunkMac mac = ChunkMac::ToCheck(TestKey(), kTask, first_index, stored);
  for (const std::string& record : records) mac.Add(record);
  return ChunkMac::Equal(mac.Finish(), stored);
}

// Element i: an int64 scalar and a string, with a provenance unlike anything a cache_read source
// would stamp (as after a shuffle): split 100 + i / 3, record 1000 + 7 i.
Element MakeElement(int64_t i) {
  Element e;
  e.tensors.push_back(Tensor::Scalar<int64_t>(i * 10 + 3));
  e.tensors.push_back(Tensor::String(absl::StrCat("payload-", i)));
  e.split_id = 100 + i / 3;
  e.record = 1000 + 7 * i;
  return e;
}

// The index MakeElement was called with, recovered from the element's provenance.
int64_t IndexOf(const Element& e) { return (e.record - 1000) / 7; }

// Every CachePut of these tests names its run after its generation (Options below).
std::string RunOf(int64_t generation) { return absl::StrCat("run", generation); }
std::string Tmp(int64_t generation, int64_t first) {
  return CachePut::TemporaryName(kTask, generation, first, RunOf(generation));
}
std::string Final(int64_t generation, int64_t first, int64_t n) {
  return CachePut::FinalName(kTask, generation, first, n);
}

// The records of a chunk file, read with the TFRecord reader.
struct ChunkFile {
  std::vector<std::string> records;
  std::vector<CachedElement> elements;
};

void ReadChunk(const std::string& path, ChunkFile* out) {
  absl::StatusOr<std::unique_ptr<SequentialFile>> file = Env::Default()->NewSequentialFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  TfRecordReader reader(std::move(file).value(), path, 0);
  while (true) {
    std::string record;
    bool end = false;
    const absl::Status status = reader.ReadRecord(&record, &end);
    ASSERT_TRUE(status.ok()) << status;
    if (end) return;
    CachedElement cached;
    ASSERT_TRUE(cached.ParseFromString(record)) << path << " record " << out->records.size();
    out->records.push_back(record);
    out->elements.push_back(std::move(cached));
  }
}

class CachePutTest : public ::testing::Test {
 protected:
  std::string CacheDir() const { return dir_.Join("cache"); }
  std::string Path(const std::string& name) const { return CacheDir() + "/" + name; }

  CachePutOptions Options(int64_t generation = 0, Env* env = Env::Default()) const {
    CachePutOptions options;
    options.env = env;
    options.dir = CacheDir();
    options.task_id = kTask;
    options.generation = generation;
    options.run_id = RunOf(generation);
    options.mac_key = TestKey();
    return options;
  }

  std::vector<std::string> Files() const {
    absl::StatusOr<std::vector<std::string>> names = Env::Default()->GetChildren(CacheDir());
    EXPECT_TRUE(names.ok()) << names.status();
    return names.ok() ? *names : std::vector<std::string>{};
  }

  std::vector<std::string> Temporaries() const {
    std::vector<std::string> tmps;
    for (const std::string& name : Files()) {
      if (absl::EndsWith(name, ".tmp")) tmps.push_back(name);
    }
    return tmps;
  }

  void WriteStray(const std::string& name) const {
    ASSERT_TRUE(Env::Default()->CreateDirs(CacheDir()).ok());
    ASSERT_TRUE(
        WriteStringToFile(Env::Default(), Path(name), "stray bytes", /*sync=*/false).ok());
  }

  static void AppendRange(CachePut& put, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const absl::Status status = put.Append(i, MakeElement(i));
      ASSERT_TRUE(status.ok()) << "element " << i << ": " << status;
    }
  }

  // Save, with the state round-tripped through its serialization as a checkpoint would.
  static IteratorStateProto SaveState(CachePut& put) {
    IteratorStateProto state;
    StateWriter writer(&state);
    const absl::Status status = put.Save(writer);
    EXPECT_TRUE(status.ok()) << status;
    IteratorStateProto reloaded;
    EXPECT_TRUE(reloaded.ParseFromString(state.SerializeAsString()));
    return reloaded;
  }

  static std::vector<CacheChunk> FinishOk(CachePut& put) {
    absl::StatusOr<std::vector<CacheChunk>> chain = put.Finish();
    EXPECT_TRUE(chain.ok()) << chain.status();
    return chain.ok() ? *chain : std::vector<CacheChunk>{};
  }

  // The chain covers 0..n-1 contiguously, each chunk under its final name, which exists.
  void ExpectContiguousChain(const std::vector<CacheChunk>& chain, int64_t n) const {
    int64_t next = 0;
    for (size_t k = 0; k < chain.size(); ++k) {
      const CacheChunk& c = chain[k];
      SCOPED_TRACE(absl::StrCat("chain chunk ", k, ": ", c.ShortDebugString()));
      EXPECT_EQ(c.task_id(), kTask);
      EXPECT_EQ(c.first_index(), next);
      EXPECT_GT(c.num_elements(), 0);
      EXPECT_EQ(c.path(), Path(Final(c.generation(), c.first_index(), c.num_elements())));
      EXPECT_TRUE(Env::Default()->FileExists(c.path()));
      next = c.first_index() + c.num_elements();
    }
    EXPECT_EQ(next, n);
  }

  // The chunk's file holds records first_index.. in order, each MakeElement(index) with its
  // index, byte for byte the records EncodeCachedElement makes, and the MAC is FORMAT.md's over
  // them.
  void ExpectChunkHolds(const CacheChunk& chunk) const {
    SCOPED_TRACE(absl::StrCat("chunk ", chunk.ShortDebugString()));
    ChunkFile file;
    ASSERT_NO_FATAL_FAILURE(ReadChunk(chunk.path(), &file));
    ASSERT_EQ(static_cast<int64_t>(file.elements.size()), chunk.num_elements());
    for (int64_t k = 0; k < chunk.num_elements(); ++k) {
      const int64_t index = chunk.first_index() + k;
      EXPECT_EQ(file.elements[k].index(), index);
      absl::StatusOr<Element> e = Element::FromProto(file.elements[k].element());
      ASSERT_TRUE(e.ok()) << e.status();
      EXPECT_TRUE(*e == MakeElement(index)) << "record " << k << " is " << e->Origin();
      EXPECT_EQ(e->split_id, MakeElement(index).split_id);
      EXPECT_EQ(e->record, MakeElement(index).record);
      EXPECT_EQ(file.records[k], EncodeCachedElement(index, MakeElement(index)));
    }
    EXPECT_EQ(chunk.mac().size(), ChunkMac::kMacBytes);
    EXPECT_TRUE(MacHolds(chunk.first_index(), file.records, chunk.mac()));
  }

  testing::ScopedTempDir dir_;
};

// --- Append and Finish ---

TEST_F(CachePutTest, FinishCommitsContiguousChainReadableBack) {
  CachePut put(Options());
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 10));
  const std::vector<CacheChunk> chain = FinishOk(put);
  ASSERT_EQ(chain.size(), 1u);  // 10 small elements, one chunk (64 MiB default)
  ExpectContiguousChain(chain, 10);
  EXPECT_EQ(chain[0].generation(), 0);
  EXPECT_EQ(chain[0].path(), Path(Final(0, 0, 10)));
  for (const CacheChunk& chunk : chain) ExpectChunkHolds(chunk);
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(0, 0, 10)));
  EXPECT_THAT(Temporaries(), IsEmpty());
}

TEST_F(CachePutTest, FinishAfterSaveCoversEveryChunkInOrder) {
  CachePut put(Options(3));
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 4));
  SaveState(put);
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 4, 9));
  SaveState(put);
  SaveState(put);  // nothing appended since: no empty chunk
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 9, 11));
  const std::vector<CacheChunk> chain = FinishOk(put);
  ASSERT_EQ(chain.size(), 3u);
  ExpectContiguousChain(chain, 11);
  for (const CacheChunk& chunk : chain) {
    EXPECT_EQ(chunk.generation(), 3);
    ExpectChunkHolds(chunk);
  }
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(3, 0, 4), Final(3, 4, 5), Final(3, 9, 2)));
}

TEST_F(CachePutTest, FinishWithoutAppendsReturnsEmptyChainAndCreatesDirectory) {
  CachePut put(Options());
  const std::vector<CacheChunk> chain = FinishOk(put);
  EXPECT_THAT(chain, IsEmpty());
  EXPECT_TRUE(Env::Default()->FileExists(CacheDir()));
  EXPECT_THAT(Files(), IsEmpty());
}

TEST_F(CachePutTest, SmallMaxChunkBytesMakesSeveralContiguousChunks) {
  CachePutOptions options = Options();
  options.max_chunk_bytes = 150;  // a record is roughly 50 bytes with its framing
  CachePut put(options);
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 20));
  const std::vector<CacheChunk> chain = FinishOk(put);
  ASSERT_GE(chain.size(), 3u);
  ExpectContiguousChain(chain, 20);
  for (size_t k = 0; k < chain.size(); ++k) {
    const CacheChunk& chunk = chain[k];
    ExpectChunkHolds(chunk);
    // Sealed as soon as it holds max_chunk_bytes, not before and not later (the last chunk is
    // sealed by Finish and may be shorter).
    const uint64_t size = *Env::Default()->GetFileSize(chunk.path());
    const int64_t last = chunk.first_index() + chunk.num_elements() - 1;
    const uint64_t last_record =
        kTfRecordFramingBytes + EncodeCachedElement(last, MakeElement(last)).size();
    EXPECT_LT(size - last_record, 150u) << chunk.path();
    if (k + 1 < chain.size()) {
      EXPECT_GE(size, 150u) << chunk.path();
    }
  }
  EXPECT_THAT(Temporaries(), IsEmpty());
  EXPECT_EQ(Files().size(), chain.size());
}

// --- Save, SyncSealed, CommitSealed ---

TEST_F(CachePutTest, SaveSealsAndOnlySyncPlusCommitRenamesToFinal) {
  CachePut put(Options());
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 4));
  EXPECT_EQ(put.sealed(), 0);
  EXPECT_THAT(Files(), UnorderedElementsAre(Tmp(0, 0)));

  SaveState(put);
  EXPECT_EQ(put.sealed(), 1);
  EXPECT_THAT(Files(), UnorderedElementsAre(Tmp(0, 0)));
  // Sealing flushed the records to the temporary.
  ChunkFile sealed;
  ASSERT_NO_FATAL_FAILURE(ReadChunk(Path(Tmp(0, 0)), &sealed));
  EXPECT_EQ(sealed.elements.size(), 4u);

  // Appends after the Save go to a new temporary; the sealed chunk is not touched.
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 4, 6));
  EXPECT_EQ(put.sealed(), 1);
  EXPECT_THAT(Files(), UnorderedElementsAre(Tmp(0, 0), Tmp(0, 4)));

  ASSERT_TRUE(put.SyncSealed(1).ok());
  EXPECT_THAT(Files(), UnorderedElementsAre(Tmp(0, 0), Tmp(0, 4)));

  ASSERT_TRUE(put.CommitSealed(1).ok());
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(0, 0, 4), Tmp(0, 4)));
  // Again: nothing left to do, nothing changes.
  ASSERT_TRUE(put.SyncSealed(1).ok());
  ASSERT_TRUE(put.CommitSealed(1).ok());
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(0, 0, 4), Tmp(0, 4)));

  const std::vector<CacheChunk> chain = FinishOk(put);
  ASSERT_EQ(chain.size(), 2u);
  ExpectContiguousChain(chain, 6);
  for (const CacheChunk& chunk : chain) ExpectChunkHolds(chunk);
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(0, 0, 4), Final(0, 4, 2)));
}

TEST_F(CachePutTest, SyncAndCommitTouchOnlyTheFirstNChunks) {
  CachePut put(Options());
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 2));
  SaveState(put);
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 2, 5));
  SaveState(put);
  ASSERT_EQ(put.sealed(), 2);
  ASSERT_TRUE(put.SyncSealed(1).ok());
  ASSERT_TRUE(put.CommitSealed(1).ok());
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(0, 0, 2), Tmp(0, 2)));
  // The second chunk was not synced: committing it is refused.
  const absl::Status status = put.CommitSealed(2);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(0, 0, 2), Tmp(0, 2)));
  ASSERT_TRUE(put.SyncSealed(2).ok());
  ASSERT_TRUE(put.CommitSealed(2).ok());
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(0, 0, 2), Final(0, 2, 3)));
}

// --- Restore ---

class CachePutRestoreTest : public CachePutTest,
                            public ::testing::WithParamInterface<int64_t> {};

// A run of generation 1 saves a checkpoint covering [0, 5), syncs the chunk and dies before
// committing it, with an open chunk [5, 8) never sealed. A runner of generation GetParam()
// (1: the same, 2: a later one) restores that checkpoint.
TEST_P(CachePutRestoreTest, RestoreRollsCommitForwardDeletesStaleTemporariesAndContinues) {
  const int64_t dead = 1;
  const int64_t restoring = GetParam();
  IteratorStateProto state;
  {
    CachePut put(Options(dead));
    ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 5));
    state = SaveState(put);
    ASSERT_EQ(put.sealed(), 1);
    ASSERT_TRUE(put.SyncSealed(1).ok());
    // The checkpoint is written here; the run dies before CommitSealed.
    ASSERT_NO_FATAL_FAILURE(AppendRange(put, 5, 8));
  }
  ASSERT_NO_FATAL_FAILURE(WriteStray(Tmp(0, 3)));                     // earlier generation
  ASSERT_NO_FATAL_FAILURE(WriteStray(Tmp(restoring, 40)));            // this generation
  ASSERT_NO_FATAL_FAILURE(WriteStray(Tmp(9, 0)));                     // later generation
  ASSERT_NO_FATAL_FAILURE(WriteStray(CachePut::TemporaryName(8, 0, 0, "x")));   // another task
  ASSERT_NO_FATAL_FAILURE(WriteStray(CachePut::TemporaryName(70, 0, 0, "x")));  // "t7" is a prefix
  ASSERT_NO_FATAL_FAILURE(WriteStray("notes.txt"));
  ASSERT_THAT(Files(), UnorderedElementsAre(Tmp(dead, 0), Tmp(dead, 5), Tmp(0, 3),
                                            Tmp(restoring, 40), Tmp(9, 0), "t8-g0-i0-rx.tmp",
                                            "t70-g0-i0-rx.tmp", "notes.txt"));

  CachePut put(Options(restoring));
  const absl::Status status = put.Restore(StateReader(&state));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(put.sealed(), 1);
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(dead, 0, 5), Tmp(9, 0), "t8-g0-i0-rx.tmp",
                                            "t70-g0-i0-rx.tmp", "notes.txt"));

  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 5, 12));
  const std::vector<CacheChunk> chain = FinishOk(put);
  ASSERT_EQ(chain.size(), 2u);
  ExpectContiguousChain(chain, 12);
  EXPECT_EQ(chain[0].generation(), dead);
  EXPECT_EQ(chain[0].path(), Path(Final(dead, 0, 5)));
  EXPECT_EQ(chain[1].generation(), restoring);
  EXPECT_EQ(chain[1].path(), Path(Final(restoring, 5, 7)));
  for (const CacheChunk& chunk : chain) ExpectChunkHolds(chunk);
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(dead, 0, 5), Final(restoring, 5, 7),
                                            Tmp(9, 0), "t8-g0-i0-rx.tmp", "t70-g0-i0-rx.tmp",
                                            "notes.txt"));
}

INSTANTIATE_TEST_SUITE_P(CachePutGenerations, CachePutRestoreTest, ::testing::Values(1, 2),
                         [](const auto& info) { return absl::StrCat("generation", info.param); });

TEST_F(CachePutTest, RestoreOfCommittedChainKeepsItAndFinishReturnsIt) {
  IteratorStateProto state;
  {
    CachePut put(Options(0));
    ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 3));
    state = SaveState(put);
    ASSERT_TRUE(put.SyncSealed(1).ok());
    ASSERT_TRUE(put.CommitSealed(1).ok());
  }
  CachePut put(Options(1));
  const absl::Status status = put.Restore(StateReader(&state));
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<CacheChunk> chain = FinishOk(put);
  ASSERT_EQ(chain.size(), 1u);
  ExpectContiguousChain(chain, 3);
  ExpectChunkHolds(chain[0]);
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(0, 0, 3)));
}

TEST_F(CachePutTest, ALaterRunOfTheSameGenerationNeverBecomesAnOlderCheckpointsChunk) {
  // Found by `granary chaos --soak`: a worker sealed 10 elements and wrote a checkpoint naming
  // them, then crashed before the commit; restarted (same generation), it ran the task afresh
  // and sealed 15 elements into a temporary of the same first index; killed again and restored
  // from the first checkpoint, it committed the second run's 15-element file as "n10".
  IteratorStateProto first_checkpoint;
  {
    CachePutOptions options = Options(1);
    options.run_id = "first";
    CachePut put(options);
    ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 10));
    first_checkpoint = SaveState(put);
    ASSERT_TRUE(put.SyncSealed(1).ok());
  }  // Crash before CommitSealed.
  {
    CachePutOptions options = Options(1);
    options.run_id = "second";
    CachePut put(options);
    ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 15));
    SaveState(put);
    ASSERT_TRUE(put.SyncSealed(1).ok());
  }  // Killed before its checkpoint was written.
  CachePutOptions options = Options(1);
  options.run_id = "third";
  CachePut put(options);
  const absl::Status restored = put.Restore(StateReader(&first_checkpoint));
  // The first run's temporary is gone (the second run cleared it): the restore must fail (the
  // task then recomputes from its start), never commit the second run's file under its name.
  EXPECT_TRUE(absl::IsDataLoss(restored)) << restored;
  EXPECT_FALSE(Env::Default()->FileExists(Path(Final(1, 0, 10))));
}

TEST_F(CachePutTest, RestoreWithChainChunkMissingIsDataLossNamingIt) {
  IteratorStateProto state;
  {
    CachePut put(Options(0));
    ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 3));
    SaveState(put);
    ASSERT_TRUE(put.SyncSealed(1).ok());
    ASSERT_TRUE(put.CommitSealed(1).ok());
    ASSERT_NO_FATAL_FAILURE(AppendRange(put, 3, 5));
    state = SaveState(put);
    ASSERT_TRUE(put.SyncSealed(2).ok());
  }
  // The second chunk is gone under both names.
  ASSERT_THAT(Files(), UnorderedElementsAre(Final(0, 0, 3), Tmp(0, 3)));
  ASSERT_TRUE(Env::Default()->DeleteFile(Path(Tmp(0, 3))).ok());

  CachePut put(Options(1));
  const absl::Status status = put.Restore(StateReader(&state));
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(Path(Final(0, 3, 2))));
  EXPECT_THAT(status.message(), Not(HasSubstr(Final(0, 0, 3))));
}

// --- Fresh start ---

TEST_F(CachePutTest, FreshStartDeletesStaleTemporariesAtFirstAppend) {
  ASSERT_NO_FATAL_FAILURE(WriteStray(Tmp(0, 0)));   // earlier generation
  ASSERT_NO_FATAL_FAILURE(WriteStray(Tmp(1, 4)));   // this generation
  ASSERT_NO_FATAL_FAILURE(WriteStray(Tmp(2, 0)));   // later generation: kept
  ASSERT_NO_FATAL_FAILURE(WriteStray(CachePut::TemporaryName(8, 0, 0, "x")));  // other task: kept
  ASSERT_NO_FATAL_FAILURE(WriteStray(Final(0, 0, 4)));  // a committed chunk: kept
  const std::vector<std::string> before = Files();

  CachePut put(Options(1));
  EXPECT_THAT(Files(), UnorderedElementsAreArray(before));  // not at construction
  ASSERT_TRUE(put.Append(0, MakeElement(0)).ok());
  EXPECT_THAT(Files(), UnorderedElementsAre(Tmp(1, 0), Tmp(2, 0), "t8-g0-i0-rx.tmp",
                                            Final(0, 0, 4)));
}

// --- Out-of-sequence appends ---

TEST_F(CachePutTest, AppendOutOfSequenceInOpenChunkIsErrorNamingElement) {
  CachePut put(Options());
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 3));
  absl::Status status = put.Append(4, MakeElement(4));
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("element 4"));
  status = put.Append(1, MakeElement(1));
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("element 1"));
  // Nothing was written for the rejected elements.
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 3, 4));
  const std::vector<CacheChunk> chain = FinishOk(put);
  ExpectContiguousChain(chain, 4);
  for (const CacheChunk& chunk : chain) ExpectChunkHolds(chunk);
}

TEST_F(CachePutTest, AppendOutOfSequenceAfterSealIsErrorNamingElement) {
  CachePut put(Options());
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 3));
  SaveState(put);  // seals: the next Append opens a new chunk
  absl::Status status = put.Append(5, MakeElement(5));
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("element 5"));
  status = put.Append(0, MakeElement(0));
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("element 0"));
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 3, 5));
  const std::vector<CacheChunk> chain = FinishOk(put);
  ExpectContiguousChain(chain, 5);
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(0, 0, 3), Final(0, 3, 2)));
}

TEST_F(CachePutTest, AppendOutOfSequenceAfterSizeSealIsErrorNamingElement) {
  CachePutOptions options = Options();
  options.max_chunk_bytes = 1;  // every record seals its chunk
  CachePut put(options);
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 2));
  ASSERT_EQ(put.sealed(), 2);
  const absl::Status status = put.Append(3, MakeElement(3));
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("element 3"));
}

TEST_F(CachePutTest, FirstAppendOfFreshStartMustBeElementZero) {
  CachePut put(Options());
  const absl::Status status = put.Append(1, MakeElement(1));
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("element 1"));
  EXPECT_THAT(Temporaries(), IsEmpty());
}

TEST_F(CachePutTest, AppendAfterRestoreMustContinueFromRestoredIndex) {
  IteratorStateProto state;
  {
    CachePut put(Options(0));
    ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 3));
    state = SaveState(put);
    ASSERT_TRUE(put.SyncSealed(1).ok());
  }
  CachePut put(Options(1));
  ASSERT_TRUE(put.Restore(StateReader(&state)).ok());
  for (int64_t wrong : {0, 2, 4}) {
    const absl::Status status = put.Append(wrong, MakeElement(wrong));
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("element ", wrong)));
  }
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 3, 6));
  const std::vector<CacheChunk> chain = FinishOk(put);
  ExpectContiguousChain(chain, 6);
  for (const CacheChunk& chunk : chain) ExpectChunkHolds(chunk);
}

// --- Faults: fsync failures and crashes (FaultInjectionEnv) ---

class CachePutFaultTest : public CachePutTest {
 protected:
  FaultInjectionEnv env_{Env::Default()};
};

TEST_F(CachePutFaultTest, SyncFailureIsReturnedAndCommitBeforeSyncRefused) {
  CachePut put(Options(0, &env_));
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 3));
  SaveState(put);
  env_.FailNextSyncs(1);
  absl::Status status = put.SyncSealed(1);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(Path(Tmp(0, 0))));
  EXPECT_THAT(status.message(), HasSubstr("injected"));
  EXPECT_EQ(env_.successful_syncs(), 0);

  status = put.CommitSealed(1);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(Path(Tmp(0, 0))));
  EXPECT_THAT(Files(), UnorderedElementsAre(Tmp(0, 0)));

  // A retry succeeds.
  ASSERT_TRUE(put.SyncSealed(1).ok());
  EXPECT_EQ(env_.successful_syncs(), 1);
  ASSERT_TRUE(put.CommitSealed(1).ok());
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(0, 0, 3)));
}

TEST_F(CachePutFaultTest, FinishReturnsSyncFailureAndCommitsNothing) {
  CachePut put(Options(0, &env_));
  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 3));
  env_.FailNextSyncs(1);
  const absl::StatusOr<std::vector<CacheChunk>> chain = put.Finish();
  EXPECT_FALSE(chain.ok());
  EXPECT_THAT(chain.status().message(), HasSubstr("injected"));
  EXPECT_THAT(Files(), UnorderedElementsAre(Tmp(0, 0)));
}

TEST_F(CachePutFaultTest, CrashKeepsCommittedChunksAndLosesUnsyncedAppends) {
  {
    CachePut put(Options(0, &env_));
    ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 4));
    SaveState(put);
    ASSERT_TRUE(put.SyncSealed(1).ok());
    ASSERT_TRUE(put.CommitSealed(1).ok());
    ASSERT_NO_FATAL_FAILURE(AppendRange(put, 4, 6));
    SaveState(put);  // sealed, never synced
    ASSERT_NO_FATAL_FAILURE(AppendRange(put, 6, 8));  // open
    ASSERT_THAT(Files(), UnorderedElementsAre(Final(0, 0, 4), Tmp(0, 4), Tmp(0, 6)));
  }
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(0, 0, 4)));
  CacheChunk committed;
  committed.set_path(Path(Final(0, 0, 4)));
  committed.set_task_id(kTask);
  committed.set_first_index(0);
  committed.set_num_elements(4);
  std::vector<std::string> records;
  for (int64_t i = 0; i < 4; ++i) records.push_back(EncodeCachedElement(i, MakeElement(i)));
  committed.set_mac(MacOf(0, records));
  ExpectChunkHolds(committed);
}

// The crash the commit protocol is built for: the chunk is synced and the checkpoint written,
// and the machine goes down before CommitSealed. The synced temporary must survive (its
// directory entry included), so that Restore can roll the commit forward.
TEST_F(CachePutFaultTest, SyncedChunkSurvivesCrashBeforeCommitAndRestoreRollsForward) {
  IteratorStateProto state;
  {
    CachePut put(Options(0, &env_));
    ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, 4));
    state = SaveState(put);
    ASSERT_TRUE(put.SyncSealed(1).ok());
    ASSERT_NO_FATAL_FAILURE(AppendRange(put, 4, 6));
  }
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_THAT(Files(), UnorderedElementsAre(Tmp(0, 0)));

  CachePut put(Options(1, &env_));
  const absl::Status status = put.Restore(StateReader(&state));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(0, 0, 4)));
  // The rename is durable too.
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(0, 0, 4)));

  ASSERT_NO_FATAL_FAILURE(AppendRange(put, 4, 7));
  const std::vector<CacheChunk> chain = FinishOk(put);
  ASSERT_EQ(chain.size(), 2u);
  ExpectContiguousChain(chain, 7);
  for (const CacheChunk& chunk : chain) ExpectChunkHolds(chunk);
  // Finish made everything durable.
  ASSERT_TRUE(env_.DropUnsyncedData().ok());
  EXPECT_THAT(Files(), UnorderedElementsAre(Final(0, 0, 4), Final(1, 4, 3)));
  for (const CacheChunk& chunk : chain) ExpectChunkHolds(chunk);
}

// --- Reading the chunks back with the cache_read source ---

// Yields MakeElement(i) for i in [begin, end): what the Put task computed at those indices.
class MadeElementsReader : public SplitReader {
 public:
  MadeElementsReader(int64_t begin, int64_t end) : next_(begin), end_(end) {}
  absl::Status Next(Element* out, bool* end) override {
    *end = next_ == end_;
    if (!*end) *out = MakeElement(next_++);
    return absl::OkStatus();
  }
  int64_t offset() const override { return 0; }

 private:
  int64_t next_;
  const int64_t end_;
};

// The worker's guard in miniature: MACs under TestKey(); a recomputation yields what the Put
// task computed (the worker's real one is tested in tests/cache_integrity_test.cc). Records
// each recomputation.
class TestGuard : public CacheChunkGuard {
 public:
  struct Recomputation {
    std::string path;
    int64_t records_done;
    absl::Status problem;
  };

  std::unique_ptr<MacCheck> StartMacCheck(const CacheChunk& chunk) const override {
    class Check : public MacCheck {
     public:
      explicit Check(CacheChunk chunk) : chunk_(std::move(chunk)) {}
      void Add(absl::string_view record) override { records_.emplace_back(record); }
      absl::Status Finish() override {
        if (MacHolds(chunk_.first_index(), records_, chunk_.mac())) {
          return absl::OkStatus();
        }
        return absl::DataLossError(absl::StrCat("cache chunk ", chunk_.path(), ": MAC differs"));
      }

     private:
      const CacheChunk chunk_;
      std::vector<std::string> records_;
    };
    return std::make_unique<Check>(chunk);
  }
  absl::StatusOr<std::unique_ptr<SplitReader>> Recompute(const CacheChunk& chunk,
                                                         int64_t records_done,
                                                         const absl::Status& problem,
                                                         const SplitOpenContext&) override {
    recomputed.push_back({chunk.path(), records_done, problem});
    return std::make_unique<MadeElementsReader>(chunk.first_index() + records_done,
                                                chunk.first_index() + chunk.num_elements());
  }

  std::vector<Recomputation> recomputed;
};

class CachePutCacheReadTest : public CachePutTest {
 protected:
  void SetUp() override {
    CachePutOptions options = Options(2);
    options.max_chunk_bytes = 200;
    CachePut put(options);
    ASSERT_NO_FATAL_FAILURE(AppendRange(put, 0, kElements));
    std::vector<CacheChunk> chain = FinishOk(put);
    ASSERT_GE(chain.size(), 3u);
    ExpectContiguousChain(chain, kElements);
    for (CacheChunk& chunk : chain) *manifest_.add_chunks() = chunk;

    // The pipeline of a Get epoch over a user pipeline without ops after the cache point.
    PipelineDef user;
    user.mutable_source()->set_type("range");
    const PipelineDef def = ReadingFromCache(user, /*cache_point=*/0, CacheDir());
    ASSERT_EQ(def.source().type(), "cache_read");
    absl::StatusOr<std::unique_ptr<Pipeline>> pipeline = Pipeline::Create(def, registries_);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    pipeline_ = std::move(pipeline).value();
  }

  // An iterator over `splits`, checked by `guard` (null: none).
  std::unique_ptr<Iterator> MakeIterator(std::vector<Split> splits,
                                         CacheChunkGuard* guard = nullptr) const {
    IteratorContext ctx{Env::Default()};
    ctx.resources.Set<CacheChunkGuard>(guard);
    absl::StatusOr<std::unique_ptr<Iterator>> it =
        pipeline_->MakeIterator(ctx, std::make_unique<PlannedSplitProvider>(std::move(splits)));
    EXPECT_TRUE(it.ok()) << it.status();
    return it.ok() ? std::move(it).value() : nullptr;
  }

  // Pulls up to `n` elements (all when n < 0) into `out`; returns the first error.
  static absl::Status Pull(Iterator* it, int64_t n, std::vector<Element>* out) {
    for (int64_t i = 0; n < 0 || i < n; ++i) {
      Element e;
      bool end = false;
      const absl::Status status = it->GetNext(&e, &end);
      if (!status.ok()) return status;
      if (end) return absl::OkStatus();
      out->push_back(std::move(e));
    }
    return absl::OkStatus();
  }

  static void ExpectElements(const std::vector<Element>& got, int64_t begin, int64_t end) {
    ASSERT_EQ(static_cast<int64_t>(got.size()), end - begin);
    for (int64_t i = begin; i < end; ++i) {
      const Element& e = got[i - begin];
      EXPECT_TRUE(e == MakeElement(i)) << "element " << i << " is " << e.Origin();
      EXPECT_EQ(e.split_id, MakeElement(i).split_id) << "element " << i;
      EXPECT_EQ(e.record, MakeElement(i).record) << "element " << i;
    }
  }

  // Reads the manifest's splits with chunk `bad`'s entry changed by `change`, without a guard;
  // expects DataLoss naming that chunk and `what`, and none of the chunk served.
  void ExpectDataLoss(int bad, const std::function<void(CacheChunk*)>& change,
                      const std::string& what) {
    std::vector<Split> splits = ChunkSplits(manifest_.chunks());
    change(splits[bad].mutable_cache_chunk());
    std::unique_ptr<Iterator> it = MakeIterator(splits);
    ASSERT_NE(it, nullptr);
    std::vector<Element> got;
    const absl::Status status = Pull(it.get(), -1, &got);
    EXPECT_TRUE(absl::IsDataLoss(status)) << status;
    EXPECT_THAT(status.message(), HasSubstr(manifest_.chunks(bad).path()));
    EXPECT_THAT(status.message(), HasSubstr(what));
    ExpectElements(got, 0, manifest_.chunks(bad).first_index());
  }

  // Rewrites chunk `k`'s file with well-framed records whose element at `changed` (an index of
  // the chunk) carries other values: what a tenant with write access to the cache directory
  // but not the key can do.
  void ForgeChunk(int k, int64_t changed) const {
    const CacheChunk& chunk = manifest_.chunks(k);
    absl::StatusOr<std::unique_ptr<WritableFile>> file =
        Env::Default()->NewWritableFile(chunk.path());
    ASSERT_TRUE(file.ok()) << file.status();
    TfRecordWriter writer(std::move(file).value());
    for (int64_t i = chunk.first_index(); i < chunk.first_index() + chunk.num_elements(); ++i) {
      Element e = MakeElement(i);
      if (i == changed) e.tensors[0] = Tensor::Scalar<int64_t>(-1);
      ASSERT_TRUE(writer.Write(EncodeCachedElement(i, e)).ok());
    }
    ASSERT_TRUE(writer.Close().ok());
  }

  static constexpr int64_t kElements = 25;
  PipelineRegistries registries_ = PipelineRegistriesWithCache();
  CacheState manifest_;
  std::unique_ptr<Pipeline> pipeline_;
  TestGuard guard_;
};

TEST_F(CachePutCacheReadTest, ChunkSplitsYieldElementsWithOriginalProvenanceInOrder) {
  const std::vector<Split> splits = ChunkSplits(manifest_.chunks());
  ASSERT_EQ(splits.size(), static_cast<size_t>(manifest_.chunks_size()));
  for (const Split& split : splits) {
    EXPECT_EQ(split.cache_chunk().mac().size(), ChunkMac::kMacBytes);
  }
  std::unique_ptr<Iterator> it = MakeIterator(splits, &guard_);
  ASSERT_NE(it, nullptr);
  std::vector<Element> got;
  const absl::Status status = Pull(it.get(), -1, &got);
  ASSERT_TRUE(status.ok()) << status;
  ExpectElements(got, 0, kElements);
  EXPECT_TRUE(guard_.recomputed.empty()) << "every chunk passes its MAC check";
}

TEST_F(CachePutCacheReadTest, SaveRestoreMidChunkContinuesIdentically) {
  const std::vector<Split> splits = ChunkSplits(manifest_.chunks());
  // Cut inside the second chunk.
  const int64_t cut = manifest_.chunks(1).first_index() + 1;
  ASSERT_LT(cut, manifest_.chunks(1).first_index() + manifest_.chunks(1).num_elements());
  std::unique_ptr<Iterator> original = MakeIterator(splits, &guard_);
  ASSERT_NE(original, nullptr);
  std::vector<Element> got;
  ASSERT_TRUE(Pull(original.get(), cut, &got).ok());
  IteratorStateProto state;
  StateWriter writer(&state);
  ASSERT_TRUE(original->Save(writer).ok());
  std::unique_ptr<Iterator> restored = MakeIterator(splits, &guard_);
  ASSERT_NE(restored, nullptr);
  const absl::Status restore = restored->Restore(StateReader(&state));
  ASSERT_TRUE(restore.ok()) << restore;
  const absl::Status status = Pull(restored.get(), -1, &got);
  ASSERT_TRUE(status.ok()) << status;
  ExpectElements(got, 0, kElements);
  EXPECT_TRUE(guard_.recomputed.empty());
}

TEST_F(CachePutCacheReadTest, FilesGlobReadsEveryChunkDirectly) {
  absl::StatusOr<std::vector<Split>> splits = pipeline_->EnumerateSplits(Env::Default());
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->size(), static_cast<size_t>(manifest_.chunks_size()));
  std::unique_ptr<Iterator> it = MakeIterator(*splits);
  ASSERT_NE(it, nullptr);
  std::vector<Element> got;
  const absl::Status status = Pull(it.get(), -1, &got);
  ASSERT_TRUE(status.ok()) << status;
  // Files come in name order ("-i10-" before "-i5-"): compare in index order.
  std::sort(got.begin(), got.end(),
            [](const Element& a, const Element& b) { return IndexOf(a) < IndexOf(b); });
  ExpectElements(got, 0, kElements);
}

TEST_F(CachePutCacheReadTest, ManifestCountAboveTheFilesIsDataLossNamingChunk) {
  ExpectDataLoss(
      1, [](CacheChunk* c) { c->set_num_elements(c->num_elements() + 1); }, "the manifest says");
}

TEST_F(CachePutCacheReadTest, ManifestCountBelowTheFilesIsDataLossNamingChunk) {
  ExpectDataLoss(
      1, [](CacheChunk* c) { c->set_num_elements(c->num_elements() - 1); }, "more than");
}

TEST_F(CachePutCacheReadTest, ManifestFirstIndexOtherThanTheRecordsIsDataLossNamingChunk) {
  ExpectDataLoss(
      1, [](CacheChunk* c) { c->set_first_index(c->first_index() + 1); }, "belongs");
}

// Issue 15, cache integrity: a chunk rewritten by someone without the key — well framed, right
// count and indices, one element's values changed — fails its MAC before any of it is served;
// the guard recomputes it and the reader serves exactly the Put task's elements.
TEST_F(CachePutCacheReadTest, ForgedChunkIsNeverServedButRecomputed) {
  const CacheChunk& forged = manifest_.chunks(1);
  ASSERT_NO_FATAL_FAILURE(ForgeChunk(1, forged.first_index() + 1));
  std::unique_ptr<Iterator> it = MakeIterator(ChunkSplits(manifest_.chunks()), &guard_);
  ASSERT_NE(it, nullptr);
  std::vector<Element> got;
  const absl::Status status = Pull(it.get(), -1, &got);
  ASSERT_TRUE(status.ok()) << status;
  ExpectElements(got, 0, kElements);
  ASSERT_EQ(guard_.recomputed.size(), 1u);
  EXPECT_EQ(guard_.recomputed[0].path, forged.path());
  EXPECT_EQ(guard_.recomputed[0].records_done, 0);
  EXPECT_TRUE(absl::IsDataLoss(guard_.recomputed[0].problem)) << guard_.recomputed[0].problem;
  EXPECT_THAT(guard_.recomputed[0].problem.message(), HasSubstr("MAC"));
}

// A task restored mid-chunk whose chunk was forged meanwhile recomputes from where it was.
TEST_F(CachePutCacheReadTest, RestoreIntoAForgedChunkRecomputesFromTheRestoredRecord) {
  const std::vector<Split> splits = ChunkSplits(manifest_.chunks());
  const int64_t cut = manifest_.chunks(1).first_index() + 1;
  std::unique_ptr<Iterator> original = MakeIterator(splits, &guard_);
  ASSERT_NE(original, nullptr);
  std::vector<Element> got;
  ASSERT_TRUE(Pull(original.get(), cut, &got).ok());
  IteratorStateProto state;
  StateWriter writer(&state);
  ASSERT_TRUE(original->Save(writer).ok());
  ASSERT_NO_FATAL_FAILURE(ForgeChunk(1, cut));
  std::unique_ptr<Iterator> restored = MakeIterator(splits, &guard_);
  ASSERT_NE(restored, nullptr);
  ASSERT_TRUE(restored->Restore(StateReader(&state)).ok());
  const absl::Status status = Pull(restored.get(), -1, &got);
  ASSERT_TRUE(status.ok()) << status;
  ExpectElements(got, 0, kElements);
  ASSERT_EQ(guard_.recomputed.size(), 1u);
  EXPECT_EQ(guard_.recomputed[0].records_done, 1);
}

TEST_F(CachePutCacheReadTest, MissingOrCutChunksAreRecomputed) {
  ASSERT_TRUE(Env::Default()->DeleteFile(manifest_.chunks(0).path()).ok());
  {
    absl::StatusOr<std::string> bytes =
        ReadFileToString(Env::Default(), manifest_.chunks(2).path());
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    ASSERT_TRUE(WriteStringToFile(Env::Default(), manifest_.chunks(2).path(),
                                  bytes->substr(0, bytes->size() - 3), /*sync=*/false)
                    .ok());
  }
  std::unique_ptr<Iterator> it = MakeIterator(ChunkSplits(manifest_.chunks()), &guard_);
  ASSERT_NE(it, nullptr);
  std::vector<Element> got;
  const absl::Status status = Pull(it.get(), -1, &got);
  ASSERT_TRUE(status.ok()) << status;
  ExpectElements(got, 0, kElements);
  ASSERT_EQ(guard_.recomputed.size(), 2u);
  EXPECT_EQ(guard_.recomputed[0].path, manifest_.chunks(0).path());
  EXPECT_TRUE(absl::IsNotFound(guard_.recomputed[0].problem)) << guard_.recomputed[0].problem;
  EXPECT_EQ(guard_.recomputed[1].path, manifest_.chunks(2).path());
  EXPECT_THAT(guard_.recomputed[1].problem.message(), HasSubstr(manifest_.chunks(2).path()));
}

}  // namespace
}  // namespace granary
