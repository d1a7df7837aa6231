#include "journal/journal.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "journal/fault_injection_fs.h"
#include "journal/format.h"
#include "rocksdb/db.h"
#include "rocksdb/iterator.h"
#include "rocksdb/options.h"
#include "testing/scoped_temp_dir.h"
#include "testing/scoped_tmpfs.h"

extern char** environ;

namespace granary {
namespace {

namespace jf = journal_format;
using ::testing::HasSubstr;
using Records = std::vector<std::pair<uint64_t, std::string>>;

// ---------------------------------------------------------------------------------------------
// Child mode. The multi-process tests fork() and exec this same binary with the two variables
// below set; the initializer of kRanAsChild then runs ChildMain before GoogleTest's main and
// never returns. (exec rather than a bare fork: the parent may already run RocksDB background
// threads, which a forked child would not have.)

constexpr char kChildDirEnv[] = "GRANARY_JOURNAL_TEST_CHILD_DIR";
constexpr char kChildFdEnv[] = "GRANARY_JOURNAL_TEST_CHILD_FD";
constexpr int kChildThreads = 4;
constexpr int64_t kChildMaxAppendsPerThread = 100000;  // A safety cap; the parent kills sooner.

std::string ChildPayload(int64_t pid, int thread, int64_t i) {
  return absl::StrCat("child ", pid, " thread ", thread, " append ", i);
}

// Opens the journal in `dir` and appends from kChildThreads threads; after each acknowledged
// Append writes one line "<seq> <thread> <i>\n" to `fd` (one write(2) of < PIPE_BUF bytes, so
// lines from different threads never interleave). Errors are reported as "error ...\n".
[[noreturn]] void ChildMain(const char* dir, int fd) {
  absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Open(dir, JournalOptions{});
  if (!journal.ok()) {
    const std::string line = absl::StrCat("error ", journal.status().ToString(), "\n");
    (void)!::write(fd, line.data(), line.size());
    ::_exit(2);
  }
  const int64_t pid = ::getpid();
  std::vector<std::thread> threads;
  for (int t = 0; t < kChildThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t i = 0; i < kChildMaxAppendsPerThread; ++i) {
        absl::StatusOr<uint64_t> seq = (*journal)->Append(ChildPayload(pid, t, i));
        const std::string line = seq.ok() ? absl::StrCat(*seq, " ", t, " ", i, "\n")
                                          : absl::StrCat("error ", seq.status().ToString(), "\n");
        if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()) ||
            !seq.ok()) {
          ::_exit(3);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ::_exit(0);
}

[[maybe_unused]] const bool kRanAsChild = []() -> bool {
  const char* dir = std::getenv(kChildDirEnv);
  const char* fd = std::getenv(kChildFdEnv);
  if (dir == nullptr || fd == nullptr) return false;
  ChildMain(dir, std::atoi(fd));
}();

struct Ack {
  uint64_t seq;
  int thread;
  int64_t i;
};

// A child process in child mode, from the parent's side. Reaps the child in the destructor.
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess() {
    if (pid_ > 0) KillAndReap();
    if (read_fd_ >= 0) ::close(read_fd_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts the child on `dir`. Returns false (with a test failure) on error.
  bool Start(const std::string& dir) {
    int fds[2];
    if (::pipe(fds) != 0) {
      ADD_FAILURE() << "pipe: " << std::strerror(errno);
      return false;
    }
    // Everything the child needs is prepared before fork(): after it, only async-signal-safe
    // calls.
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    env_strings.push_back(absl::StrCat(kChildDirEnv, "=", dir));
    env_strings.push_back(absl::StrCat(kChildFdEnv, "=", fds[1]));
    std::vector<char*> envp;
    for (std::string& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    char arg0[] = "journal_test_child";
    char* argv[] = {arg0, nullptr};

    const pid_t pid = ::fork();
    if (pid < 0) {
      ADD_FAILURE() << "fork: " << std::strerror(errno);
      ::close(fds[0]);
      ::close(fds[1]);
      return false;
    }
    if (pid == 0) {
      ::close(fds[0]);
      ::execve("/proc/self/exe", argv, envp.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    pid_ = pid;
    read_fd_ = fds[0];
    return true;
  }

  // Reads acknowledgements until at least `n` arrived. Returns false (with a test failure) if
  // the child reported an error, exited, or `timeout` passed first.
  bool WaitForAcks(size_t n, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (acks_.size() < n) {
      const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
      if (left_ms <= 0) {
        ADD_FAILURE() << "timed out with " << acks_.size() << " of " << n << " acks";
        return false;
      }
      struct pollfd pfd = {read_fd_, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(left_ms)) < 0 && errno != EINTR) {
        ADD_FAILURE() << "poll: " << std::strerror(errno);
        return false;
      }
      if (!ReadSome()) {
        ADD_FAILURE() << "the child closed its pipe after " << acks_.size() << " of " << n
                      << " acks";
        return false;
      }
      if (!error_.empty()) {
        ADD_FAILURE() << "child: " << error_;
        return false;
      }
    }
    return true;
  }

  // SIGKILLs the child, reaps it, then reads every acknowledgement it wrote before dying.
  // Returns the wait status.
  int KillAndReap() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    while (ReadSome()) {
    }
    return status;
  }

  pid_t pid() const { return pid_; }  // -1 once reaped.
  const std::vector<Ack>& acks() const { return acks_; }
  const std::string& error() const { return error_; }  // The first unparsable line, if any.

 private:
  // Reads once (blocking) and parses whole lines. Returns false at end of file.
  bool ReadSome() {
    char buffer[4096];
    ssize_t n;
    do {
      n = ::read(read_fd_, buffer, sizeof(buffer));
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return false;
    pending_.append(buffer, n);
    size_t newline;
    while ((newline = pending_.find('\n')) != std::string::npos) {
      const std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      const std::vector<std::string> fields = absl::StrSplit(line, ' ');
      Ack ack;
      if (fields.size() != 3 || !absl::SimpleAtoi(fields[0], &ack.seq) ||
          !absl::SimpleAtoi(fields[1], &ack.thread) || !absl::SimpleAtoi(fields[2], &ack.i)) {
        if (error_.empty()) error_ = line;
        continue;
      }
      acks_.push_back(ack);
    }
    return true;
  }

  pid_t pid_ = -1;
  int read_fd_ = -1;
  std::string pending_;
  std::vector<Ack> acks_;
  std::string error_;
};

// ---------------------------------------------------------------------------------------------
// Helpers.

std::unique_ptr<Journal> OpenJournal(const std::string& dir,
                                     const JournalOptions& options = JournalOptions{}) {
  absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Open(dir, options);
  EXPECT_TRUE(journal.ok()) << journal.status();
  return journal.ok() ? std::move(journal).value() : nullptr;
}

// Appends `payloads` in order and expects consecutive sequence numbers from `first_seq`.
void AppendAll(Journal& journal, const std::vector<std::string>& payloads, uint64_t first_seq) {
  for (size_t i = 0; i < payloads.size(); ++i) {
    absl::StatusOr<uint64_t> seq = journal.Append(payloads[i]);
    ASSERT_TRUE(seq.ok()) << seq.status();
    EXPECT_EQ(*seq, first_seq + i);
  }
}

std::vector<std::string> Payloads(int n, absl::string_view tag = "record") {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(absl::StrCat(tag, " ", i));
  return out;
}

// Records numbered first_seq, first_seq + 1, ... holding `payloads`.
Records Numbered(const std::vector<std::string>& payloads, uint64_t first_seq) {
  Records out;
  for (size_t i = 0; i < payloads.size(); ++i) out.emplace_back(first_seq + i, payloads[i]);
  return out;
}

// A plain RocksDB handle on a journal directory (the journal must be closed), for inspecting
// and damaging what is stored.
class RawDb {
 public:
  explicit RawDb(const std::string& dir) {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    const rocksdb::Status s = rocksdb::DB::Open(options, dir, &db);
    EXPECT_TRUE(s.ok()) << s.ToString();
    db_.reset(db);
  }
  std::string Get(const std::string& key) {
    std::string value;
    const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), key, &value);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return value;
  }
  void Put(const std::string& key, const std::string& value) {
    rocksdb::WriteOptions options;
    options.sync = true;
    const rocksdb::Status s = db_->Put(options, key, value);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  void Delete(const std::string& key) {
    rocksdb::WriteOptions options;
    options.sync = true;
    const rocksdb::Status s = db_->Delete(options, key);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  std::vector<std::string> Keys() {
    std::vector<std::string> keys;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) keys.push_back(it->key().ToString());
    EXPECT_TRUE(it->status().ok()) << it->status().ToString();
    return keys;
  }

 private:
  std::unique_ptr<rocksdb::DB> db_;
};

std::vector<std::string> RecordKeys(const std::vector<uint64_t>& seqs) {
  std::vector<std::string> keys;
  for (uint64_t seq : seqs) keys.push_back(jf::RecordKey(seq));
  return keys;
}

class JournalTest : public ::testing::Test {
 protected:
  // Writes records 1..n ("record 0" ... "record n-1") into a fresh journal and closes it.
  void WriteRecords(int n) {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    AppendAll(*journal, Payloads(n), 1);
  }
  // Opens the journal and returns Recover()'s error (a test failure if it succeeds).
  absl::Status RecoverError() {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    if (journal == nullptr) return absl::InternalError("open failed");
    absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
    EXPECT_FALSE(recovered.ok()) << "recovered " << recovered->records.size() << " records";
    return recovered.status();
  }
  std::string Prefix() const { return absl::StrCat("journal ", dir_.path(), ": "); }

  testing::ScopedTempDir dir_;
};

// ---------------------------------------------------------------------------------------------
// Appending and recovering.

TEST_F(JournalTest, EmptyJournalRecoversNothing) {
  std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
  ASSERT_NE(journal, nullptr);
  EXPECT_EQ(journal->last_sequence(), 0u);
  absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_FALSE(recovered->has_snapshot);
  EXPECT_TRUE(recovered->records.empty());
}

TEST_F(JournalTest, AppendThenRecoverRoundTripsNumberedFromOne) {
  // Opaque bytes: empty, binary with NULs, and large.
  const std::vector<std::string> payloads = {"first", "", std::string("\0\xff\x01", 3),
                                             std::string(1 << 20, 'x'), "last"};
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    AppendAll(*journal, payloads, 1);
    EXPECT_EQ(journal->last_sequence(), payloads.size());
    // Recover on the open journal sees everything appended so far.
    absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
    ASSERT_TRUE(recovered.ok()) << recovered.status();
    EXPECT_EQ(recovered->records, Numbered(payloads, 1));
  }
  std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
  ASSERT_NE(journal, nullptr);
  EXPECT_EQ(journal->last_sequence(), payloads.size());
  absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_FALSE(recovered->has_snapshot);
  EXPECT_EQ(recovered->records, Numbered(payloads, 1));
}

TEST_F(JournalTest, ReopenContinuesNumbering) {
  const std::vector<std::string> first = Payloads(3, "first");
  const std::vector<std::string> second = Payloads(4, "second");
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    AppendAll(*journal, first, 1);
  }
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    AppendAll(*journal, second, 4);
  }
  std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
  ASSERT_NE(journal, nullptr);
  absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  Records expected = Numbered(first, 1);
  for (auto& record : Numbered(second, 4)) expected.push_back(record);
  EXPECT_EQ(recovered->records, expected);
}

TEST_F(JournalTest, MaxBatchRecordsBelowOneIsInvalidArgument) {
  JournalOptions options;
  options.max_batch_records = 0;
  absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Open(dir_.path(), options);
  EXPECT_EQ(journal.status().code(), absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Group commit.

// `threads` threads append `per_thread` records each; every acknowledged append must be
// recovered exactly once under its sequence number, and the numbers must be 1..total.
void ExpectConcurrentAppendsRecoveredExactlyOnce(const std::string& dir, int threads,
                                                 int per_thread, const JournalOptions& options,
                                                 bool expect_grouping) {
  const int64_t total = static_cast<int64_t>(threads) * per_thread;
  std::vector<Records> acked(threads);
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir, options);
    ASSERT_NE(journal, nullptr);
    std::atomic<bool> go{false};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        for (int i = 0; i < per_thread; ++i) {
          std::string payload = absl::StrCat("thread ", t, " append ", i);
          absl::StatusOr<uint64_t> seq = journal->Append(payload);
          if (!seq.ok()) {
            ADD_FAILURE() << seq.status();
            return;
          }
          acked[t].emplace_back(*seq, std::move(payload));
        }
      });
    }
    go.store(true);
    for (std::thread& worker : workers) worker.join();
    EXPECT_EQ(journal->last_sequence(), static_cast<uint64_t>(total));
    const int64_t batches = journal->batches_written();
    if (expect_grouping) {
      EXPECT_LT(batches, total) << "no two appends shared a batch";
    } else {
      EXPECT_EQ(batches, total);
    }
    std::printf("%d threads x %d appends: %lld batches\n", threads, per_thread,
                static_cast<long long>(batches));
  }
  std::unique_ptr<Journal> journal = OpenJournal(dir, options);
  ASSERT_NE(journal, nullptr);
  absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_EQ(recovered->records.size(), static_cast<size_t>(total));
  // Recover guarantees contiguity from 1; every ack at its position means every ack is there,
  // and since there are exactly `total` records and `total` distinct acks, each exactly once.
  for (int t = 0; t < threads; ++t) {
    uint64_t previous = 0;
    for (const auto& [seq, payload] : acked[t]) {
      EXPECT_GT(seq, previous) << "a thread's appends must be numbered in its order";
      previous = seq;
      ASSERT_GE(seq, 1u);
      ASSERT_LE(seq, static_cast<uint64_t>(total));
      EXPECT_EQ(recovered->records[seq - 1], std::make_pair(seq, payload));
    }
  }
}

TEST_F(JournalTest, GroupCommitEightThreadsRecoversEveryAckExactlyOnce) {
  ExpectConcurrentAppendsRecoveredExactlyOnce(dir_.path(), 8, 100, JournalOptions{},
                                              /*expect_grouping=*/true);
}

TEST_F(JournalTest, GroupCommitSixtyFourThreadsRecoversEveryAckExactlyOnce) {
  ExpectConcurrentAppendsRecoveredExactlyOnce(dir_.path(), 64, 20, JournalOptions{},
                                              /*expect_grouping=*/true);
}

TEST_F(JournalTest, MaxBatchRecordsOneWritesOneBatchPerAppend) {
  JournalOptions options;
  options.max_batch_records = 1;
  ExpectConcurrentAppendsRecoveredExactlyOnce(dir_.path(), 8, 10, options,
                                              /*expect_grouping=*/false);
}

// ---------------------------------------------------------------------------------------------
// Snapshots.

TEST_F(JournalTest, SnapshotThenAppendsRecoversSnapshotAndTailOnly) {
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    AppendAll(*journal, Payloads(5, "old"), 1);
    ASSERT_TRUE(journal->WriteSnapshot(3, "state after 3").ok());
    AppendAll(*journal, Payloads(2, "new"), 6);
  }
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    EXPECT_EQ(journal->last_sequence(), 7u);
    absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
    ASSERT_TRUE(recovered.ok()) << recovered.status();
    EXPECT_TRUE(recovered->has_snapshot);
    EXPECT_EQ(recovered->snapshot_seq, 3u);
    EXPECT_EQ(recovered->snapshot, "state after 3");
    EXPECT_EQ(recovered->records,
              (Records{{4, "old 3"}, {5, "old 4"}, {6, "new 0"}, {7, "new 1"}}));
  }
  // Records 1..3 are gone from storage, not merely skipped.
  RawDb raw(dir_.path());
  std::vector<std::string> expected = {jf::kFormatKey, jf::kHighWaterKey};
  for (const std::string& key : RecordKeys({4, 5, 6, 7})) expected.push_back(key);
  expected.push_back(jf::SnapshotKey(3));
  expected.push_back(jf::kHighWaterFileKey);
  EXPECT_EQ(raw.Keys(), expected);
}

TEST_F(JournalTest, NewerSnapshotReplacesOlderAndCoversEveryRecord) {
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    AppendAll(*journal, Payloads(4), 1);
    ASSERT_TRUE(journal->WriteSnapshot(2, "state after 2").ok());
    ASSERT_TRUE(journal->WriteSnapshot(4, "state after 4").ok());
    absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
    ASSERT_TRUE(recovered.ok()) << recovered.status();
    EXPECT_EQ(recovered->snapshot_seq, 4u);
    EXPECT_EQ(recovered->snapshot, "state after 4");
    EXPECT_TRUE(recovered->records.empty());
    // Numbering continues after a snapshot that covers everything.
    AppendAll(*journal, {"after"}, 5);
  }
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
    ASSERT_TRUE(recovered.ok()) << recovered.status();
    EXPECT_EQ(recovered->snapshot_seq, 4u);
    EXPECT_EQ(recovered->records, (Records{{5, "after"}}));
  }
  RawDb raw(dir_.path());
  EXPECT_EQ(raw.Keys(),
            (std::vector<std::string>{jf::kFormatKey, jf::kHighWaterKey, jf::RecordKey(5),
                                      jf::SnapshotKey(4), jf::kHighWaterFileKey}));
}

TEST_F(JournalTest, SnapshotOutsideRecordedRangeIsInvalidArgument) {
  std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
  ASSERT_NE(journal, nullptr);
  AppendAll(*journal, Payloads(3), 1);
  EXPECT_EQ(journal->WriteSnapshot(4, "future").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(journal->WriteSnapshot(2, "state after 2").ok());
  EXPECT_EQ(journal->WriteSnapshot(1, "older").code(), absl::StatusCode::kInvalidArgument);
  // A rejected snapshot is the caller's mistake, not a failed write: the journal stays usable.
  absl::StatusOr<uint64_t> seq = journal->Append("more");
  ASSERT_TRUE(seq.ok()) << seq.status();
  EXPECT_EQ(*seq, 4u);
}

// A crash between "snapshot written" and "covered records deleted" cannot happen (one batch),
// but a journal holding covered records and an older snapshot next to the newest one must still
// recover to the newest snapshot plus its tail.
TEST_F(JournalTest, CoveredRecordsAndOlderSnapshotsLeftBehindAreIgnored) {
  std::string old_record_2;
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    AppendAll(*journal, Payloads(5), 1);
  }
  {
    RawDb raw(dir_.path());
    old_record_2 = raw.Get(jf::RecordKey(2));
  }
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    ASSERT_TRUE(journal->WriteSnapshot(1, "state after 1").ok());
    ASSERT_TRUE(journal->WriteSnapshot(3, "state after 3").ok());
  }
  {
    RawDb raw(dir_.path());
    raw.Put(jf::RecordKey(2), old_record_2);
    raw.Put(jf::SnapshotKey(1), jf::EncodeValue(jf::SnapshotKey(1), "state after 1"));
  }
  std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
  ASSERT_NE(journal, nullptr);
  absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->snapshot_seq, 3u);
  EXPECT_EQ(recovered->snapshot, "state after 3");
  EXPECT_EQ(recovered->records, (Records{{4, "record 3"}, {5, "record 4"}}));
}

TEST_F(JournalTest, SnapshotsConcurrentWithAppendsRecoverConsistently) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 50;
  std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
  ASSERT_NE(journal, nullptr);
  std::map<uint64_t, std::string> acked;
  absl::Mutex acked_mu;
  std::atomic<bool> done{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        std::string payload = absl::StrCat("thread ", t, " append ", i);
        absl::StatusOr<uint64_t> seq = journal->Append(payload);
        if (!seq.ok()) {
          ADD_FAILURE() << seq.status();
          return;
        }
        absl::MutexLock lock(&acked_mu);
        EXPECT_TRUE(acked.emplace(*seq, std::move(payload)).second) << "seq " << *seq << " twice";
      }
    });
  }
  std::thread snapshotter([&] {
    int snapshots = 0;
    while (!done.load() || snapshots == 0) {
      const uint64_t seq = journal->last_sequence();
      const absl::Status status = journal->WriteSnapshot(seq, absl::StrCat("covers ", seq));
      EXPECT_TRUE(status.ok()) << status;
      ++snapshots;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  for (std::thread& worker : workers) worker.join();
  done.store(true);
  snapshotter.join();

  absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_TRUE(recovered->has_snapshot);
  EXPECT_EQ(recovered->snapshot, absl::StrCat("covers ", recovered->snapshot_seq));
  constexpr uint64_t kTotal = kThreads * kPerThread;
  ASSERT_EQ(recovered->snapshot_seq + recovered->records.size(), kTotal);
  for (const auto& [seq, payload] : recovered->records) EXPECT_EQ(acked[seq], payload);
}

// ---------------------------------------------------------------------------------------------
// Corruption: each case is DataLoss naming the sequence number.

TEST_F(JournalTest, ChecksumMismatchIsDataLossNamingTheRecord) {
  WriteRecords(5);
  {
    RawDb raw(dir_.path());
    std::string value = raw.Get(jf::RecordKey(3));
    value.back() ^= 0x01;  // One bit of the payload.
    raw.Put(jf::RecordKey(3), value);
  }
  const absl::Status status = RecoverError();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(), Prefix() + "record 3: checksum mismatch");
}

TEST_F(JournalTest, ShortValueIsDataLossNamingTheRecord) {
  WriteRecords(5);
  {
    RawDb raw(dir_.path());
    raw.Put(jf::RecordKey(2), raw.Get(jf::RecordKey(2)).substr(0, 5));  // A torn value.
  }
  const absl::Status status = RecoverError();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(),
            Prefix() + "record 2: value of 5 bytes is shorter than its 8-byte checksum");
}

TEST_F(JournalTest, ValueCopiedUnderAnotherKeyIsDataLossNamingTheRecord) {
  WriteRecords(5);
  {
    RawDb raw(dir_.path());
    raw.Put(jf::RecordKey(4), raw.Get(jf::RecordKey(3)));  // Intact bytes, wrong place.
  }
  const absl::Status status = RecoverError();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(), Prefix() + "record 4: checksum mismatch");
}

TEST_F(JournalTest, GapIsDataLossNamingTheMissingRecord) {
  WriteRecords(5);
  {
    RawDb raw(dir_.path());
    raw.Delete(jf::RecordKey(3));
  }
  const absl::Status status = RecoverError();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(), Prefix() + "record 3: missing (the next stored record is 4)");
}

TEST_F(JournalTest, MissingFirstRecordIsDataLossNamingIt) {
  WriteRecords(3);
  {
    RawDb raw(dir_.path());
    raw.Delete(jf::RecordKey(1));
  }
  const absl::Status status = RecoverError();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(), Prefix() + "record 1: missing (the next stored record is 2)");
}

TEST_F(JournalTest, LostTailIsDataLossNamingTheFirstMissingRecord) {
  WriteRecords(5);
  {
    RawDb raw(dir_.path());
    raw.Delete(jf::RecordKey(5));
    raw.Delete(jf::RecordKey(4));
  }
  const absl::Status status = RecoverError();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(), Prefix() + "record 4: missing (the high-water mark is 5)");
}

TEST_F(JournalTest, RecordBeyondHighWaterMarkIsDataLossNamingIt) {
  WriteRecords(2);
  {
    RawDb raw(dir_.path());
    raw.Put(jf::RecordKey(3), jf::EncodeValue(jf::RecordKey(3), "never acknowledged"));
  }
  const absl::Status status = RecoverError();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(), Prefix() + "record 3: stored beyond the high-water mark 2");
}

TEST_F(JournalTest, CorruptSnapshotIsDataLossNamingItsSequence) {
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    AppendAll(*journal, Payloads(4), 1);
    ASSERT_TRUE(journal->WriteSnapshot(3, "state after 3").ok());
  }
  {
    RawDb raw(dir_.path());
    std::string value = raw.Get(jf::SnapshotKey(3));
    value[jf::kChecksumSize] ^= 0x40;
    raw.Put(jf::SnapshotKey(3), value);
  }
  const absl::Status status = RecoverError();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(status.message(), Prefix() + "snapshot 3: checksum mismatch");
}

TEST_F(JournalTest, CorruptHighWaterMarkFailsOpenWithDataLoss) {
  WriteRecords(2);
  {
    RawDb raw(dir_.path());
    std::string value = raw.Get(jf::kHighWaterKey);
    value.back() ^= 0x01;
    raw.Put(jf::kHighWaterKey, value);
  }
  absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Open(dir_.path(), JournalOptions{});
  EXPECT_EQ(journal.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(journal.status().message(), Prefix() + "high-water mark: checksum mismatch");
}

TEST_F(JournalTest, RocksDbWithoutFormatMarkerIsFailedPrecondition) {
  {
    RawDb raw(dir_.path());
    raw.Put("some", "other data");
  }
  absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Open(dir_.path(), JournalOptions{});
  EXPECT_EQ(journal.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(journal.status().message(), HasSubstr("not a Granary journal"));
}

// ---------------------------------------------------------------------------------------------
// Exclusive access.

TEST_F(JournalTest, SecondOpenInSameProcessIsFailedPreconditionNamingTheDir) {
  std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
  ASSERT_NE(journal, nullptr);
  AppendAll(*journal, {"one"}, 1);
  absl::StatusOr<std::unique_ptr<Journal>> second = Journal::Open(dir_.path(), JournalOptions{});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr(Prefix() + "in use"));
  // The first opener is unaffected.
  AppendAll(*journal, {"two"}, 2);
  absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->records, (Records{{1, "one"}, {2, "two"}}));
}

TEST_F(JournalTest, SecondOpenFromAnotherProcessIsFailedPreconditionNamingTheDir) {
  ChildProcess child;
  ASSERT_TRUE(child.Start(dir_.path()));
  ASSERT_TRUE(child.WaitForAcks(1, absl::Seconds(10)));  // The child holds the journal open.
  absl::StatusOr<std::unique_ptr<Journal>> second = Journal::Open(dir_.path(), JournalOptions{});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr(Prefix() + "in use"));
  const int status = child.KillAndReap();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "wait status " << status;
  // Once the holder is gone the journal opens, and the failed opener damaged nothing.
  std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
  ASSERT_NE(journal, nullptr);
  absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_GE(recovered->records.size(), child.acks().size());
}

// ---------------------------------------------------------------------------------------------
// Durability and failed writes.

// Three child processes in turn append to one journal from kChildThreads threads and are
// SIGKILLed mid-stream after a fixed number of acknowledgements (no randomness: the kill points
// are listed in the trace). After each kill, every acknowledged append is recovered under its
// sequence number, together with everything acknowledged by earlier children, and no record is
// stored twice.
TEST_F(JournalTest, AcknowledgedAppendsSurviveSigkill) {
  const size_t kKillAfterAcks[] = {1, 64, 300};
  std::map<uint64_t, std::string> acked;  // Across all children.
  for (size_t round = 0; round < std::size(kKillAfterAcks); ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round, ", SIGKILL after ", kKillAfterAcks[round], " acks"));
    ChildProcess child;
    ASSERT_TRUE(child.Start(dir_.path()));
    const pid_t pid = child.pid();
    ASSERT_TRUE(child.WaitForAcks(kKillAfterAcks[round], absl::Seconds(10)));
    const int status = child.KillAndReap();
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "wait status " << status << "; child: " << child.error();
    ASSERT_TRUE(child.error().empty()) << child.error();
    for (const Ack& ack : child.acks()) {
      ASSERT_TRUE(acked.emplace(ack.seq, ChildPayload(pid, ack.thread, ack.i)).second)
          << "seq " << ack.seq << " acknowledged twice";
    }

    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
    ASSERT_TRUE(recovered.ok()) << recovered.status();
    ASSERT_FALSE(recovered->has_snapshot);
    std::set<std::string> seen;
    for (const auto& [seq, payload] : recovered->records) {
      EXPECT_TRUE(seen.insert(payload).second) << "record stored twice: " << payload;
    }
    for (const auto& [seq, payload] : acked) {
      ASSERT_LE(seq, recovered->records.size()) << "acknowledged seq " << seq << " lost";
      EXPECT_EQ(recovered->records[seq - 1].second, payload) << "seq " << seq;
    }
    EXPECT_EQ(journal->last_sequence(), recovered->records.size());
  }
}

TEST_F(JournalTest, FailedSyncFailsTheAppendAndEveryLaterWrite) {
  auto fs = std::make_shared<FaultInjectionFileSystem>();
  JournalOptions options;
  options.file_system = fs;
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path(), options);
    ASSERT_NE(journal, nullptr);
    AppendAll(*journal, {"durable"}, 1);

    fs->set_fail_wal_syncs(true);
    absl::StatusOr<uint64_t> failed = journal->Append("indeterminate");
    EXPECT_FALSE(failed.ok());
    EXPECT_THAT(failed.status().message(), HasSubstr("injected WAL sync failure"));
    EXPECT_GT(fs->wal_syncs_failed(), 0);

    // Fail-stop: even with the disk healthy again, nothing more is written.
    fs->set_fail_wal_syncs(false);
    absl::StatusOr<uint64_t> later = journal->Append("later");
    EXPECT_EQ(later.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(later.status().message(), HasSubstr("unusable after a failed write"));
    EXPECT_EQ(journal->WriteSnapshot(1, "state").code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(journal->last_sequence(), 1u);
  }
  // Reopened, the acknowledged record is there; the failed one may or may not be.
  std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
  ASSERT_NE(journal, nullptr);
  absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_GE(recovered->records.size(), 1u);
  ASSERT_LE(recovered->records.size(), 2u);
  EXPECT_EQ(recovered->records[0], std::make_pair(uint64_t{1}, std::string("durable")));
  if (recovered->records.size() == 2) {
    EXPECT_EQ(recovered->records[1], std::make_pair(uint64_t{2}, std::string("indeterminate")));
  }
  absl::StatusOr<uint64_t> seq = journal->Append("after reopen");
  ASSERT_TRUE(seq.ok()) << seq.status();
  EXPECT_EQ(*seq, recovered->records.size() + 1);
}

// A file system that reports a full disk at fsync, after the bytes were handed over: the
// "refused" record may be whole in the WAL. The journal answers Unavailable, but the reopen
// before the next write finds the record and goes fail-stop instead of reusing its number; a
// restart recovers it (an indeterminate append, as after any failed sync).
TEST_F(JournalTest, NoSpaceAtSyncWithTheRecordInTheWalGoesFailStopNotReuse) {
  auto fs = std::make_shared<FaultInjectionFileSystem>();
  fs->set_wal_sync_failures_are_no_space(true);
  JournalOptions options;
  options.file_system = fs;
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path(), options);
    ASSERT_NE(journal, nullptr);
    AppendAll(*journal, {"durable"}, 1);
    fs->set_fail_wal_syncs(true);
    absl::StatusOr<uint64_t> refused = journal->Append("whole in the WAL");
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
    fs->set_fail_wal_syncs(false);
    absl::StatusOr<uint64_t> next = journal->Append("next");
    EXPECT_EQ(next.status().code(), absl::StatusCode::kFailedPrecondition) << next.status();
    EXPECT_THAT(std::string(next.status().message()), HasSubstr("in the journal after all"));
    EXPECT_EQ(journal->Append("later").status().code(), absl::StatusCode::kFailedPrecondition);
  }
  std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
  ASSERT_NE(journal, nullptr);
  absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->records, (Records{{1, "durable"}, {2, "whole in the WAL"}}));
}

// ---------------------------------------------------------------------------------------------
// Lost or damaged RocksDB files (issue 13, defect 5). RocksDB alone does not notice the loss of
// its newest WAL: the records in it, and the high-water mark written with them, simply vanish.

// The RocksDB files in `dir` whose names end with `suffix` (e.g. ".log"), sorted by name (=
// by file number, RocksDB pads them to six digits).
std::vector<std::string> FilesEndingWith(const std::string& dir, absl::string_view suffix,
                                         absl::string_view prefix = "") {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (absl::EndsWith(name, suffix) && absl::StartsWith(name, prefix)) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The newest WAL file's name (a test failure and "" if there is none).
std::string NewestWal(const std::string& dir) {
  const std::vector<std::string> wals = FilesEndingWith(dir, ".log");
  EXPECT_FALSE(wals.empty()) << "no WAL in " << dir;
  return wals.empty() ? "" : wals.back();
}

void TruncateFile(const std::string& path, uintmax_t size) {
  std::error_code ec;
  std::filesystem::resize_file(path, size, ec);
  ASSERT_FALSE(ec) << path << ": " << ec.message();
}

// Journal::Open's error (a test failure if it opens).
absl::Status OpenError(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Open(dir, JournalOptions{});
  EXPECT_FALSE(journal.ok()) << "opened";
  return journal.status();
}

class LostFilesTest : public JournalTest {
 protected:
  // Session 1 appends records 1..5 and closes; session 2 reopens (RocksDB moves what session 1
  // wrote out of its WAL into a table file), appends 6..10 and closes: records 6..10 are only
  // in the newest WAL.
  void WriteTwoSessions() {
    WriteRecords(5);
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    ASSERT_EQ(journal->last_sequence(), 5u);
    AppendAll(*journal, Payloads(5, "second"), 6);
  }
  void ExpectRecoversTen() {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
    ASSERT_TRUE(recovered.ok()) << recovered.status();
    EXPECT_EQ(recovered->records.size(), 10u);
  }
};

TEST_F(LostFilesTest, CleanReopensStayOk) {
  WriteTwoSessions();
  for (int i = 0; i < 3; ++i) ExpectRecoversTen();
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    ASSERT_TRUE(journal->WriteSnapshot(10, "state at 10").ok());
    AppendAll(*journal, {"eleven"}, 11);
  }
  std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
  ASSERT_NE(journal, nullptr);
  absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->snapshot_seq, 10u);
  EXPECT_EQ(recovered->records, (Records{{11, "eleven"}}));
}

TEST_F(LostFilesTest, DeletedNewestWalIsDataLossNamingItAndTheLostRecords) {
  WriteTwoSessions();
  const std::string wal = NewestWal(dir_.path());
  ASSERT_TRUE(std::filesystem::remove(dir_.Join(wal)));
  const absl::Status status = OpenError(dir_.path());
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(Prefix() + "WAL " + wal + " missing"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("records 6..10 lost"));
  // Refusing changed nothing that makes a second attempt succeed.
  EXPECT_EQ(OpenError(dir_.path()).code(), absl::StatusCode::kDataLoss);
}

TEST_F(LostFilesTest, DeletedOnlyWalOfFreshJournalIsDataLoss) {
  WriteRecords(5);
  const std::string wal = NewestWal(dir_.path());
  ASSERT_TRUE(std::filesystem::remove(dir_.Join(wal)));
  const absl::Status status = OpenError(dir_.path());
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("records 1..5 lost"));
}

TEST_F(LostFilesTest, WalTruncatedMidRecordIsDataLossNamingTheLostRecords) {
  WriteTwoSessions();
  const std::string wal = NewestWal(dir_.path());
  const uintmax_t size = std::filesystem::file_size(dir_.Join(wal));
  TruncateFile(dir_.Join(wal), size - 7);
  const absl::Status status = OpenError(dir_.path());
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(Prefix() + "WAL " + wal));
  EXPECT_THAT(std::string(status.message()), HasSubstr("records 10..10 lost"));
}

TEST_F(LostFilesTest, WalTruncatedToEmptyIsDataLossNamingTheLostRecords) {
  WriteTwoSessions();
  const std::string wal = NewestWal(dir_.path());
  TruncateFile(dir_.Join(wal), 0);
  const absl::Status status = OpenError(dir_.path());
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(Prefix() + "WAL " + wal + " truncated"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("records 6..10 lost"));
}

TEST_F(LostFilesTest, CorruptWalRecordIsDataLossNamingTheRecordNumber) {
  WriteTwoSessions();
  const std::string wal = dir_.Join(NewestWal(dir_.path()));
  // Flip one byte inside record 8's payload ("second 2"), in the middle of the WAL.
  std::string bytes;
  {
    std::ifstream in(wal, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t at = bytes.find("second 2");
  ASSERT_NE(at, std::string::npos);
  bytes[at] ^= 0x20;
  {
    std::ofstream out(wal, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), bytes.size());
  }
  const absl::Status status = OpenError(dir_.path());
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("records 8..10"));
}

TEST_F(LostFilesTest, TruncatedManifestIsDataLossNotForeign) {
  WriteTwoSessions();
  ExpectRecoversTen();  // Moves everything into table files listed by the MANIFEST.
  const std::vector<std::string> manifests = FilesEndingWith(dir_.path(), "", "MANIFEST-");
  ASSERT_FALSE(manifests.empty());
  const std::string manifest = dir_.Join(manifests.back());
  TruncateFile(manifest, std::filesystem::file_size(manifest) / 2);
  const absl::Status status = OpenError(dir_.path());
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), ::testing::Not(HasSubstr("not a Granary journal")));
}

TEST_F(LostFilesTest, ManifestTruncatedToEmptyIsDataLossNotForeign) {
  WriteTwoSessions();
  ExpectRecoversTen();
  const std::vector<std::string> manifests = FilesEndingWith(dir_.path(), "", "MANIFEST-");
  ASSERT_FALSE(manifests.empty());
  TruncateFile(dir_.Join(manifests.back()), 0);
  const absl::Status status = OpenError(dir_.path());
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), ::testing::Not(HasSubstr("not a Granary journal")));
}

// Damage RocksDB finds in a table file while recovery reads the records is DataLoss naming
// the first record not read.
TEST_F(LostFilesTest, CorruptTableFileIsDataLossNamingTheRecord) {
  WriteTwoSessions();
  ExpectRecoversTen();
  std::vector<std::string> tables = FilesEndingWith(dir_.path(), ".sst");
  ASSERT_FALSE(tables.empty());
  // Damage every table file at the record "second 2" (record 8) or, if compression hid it, in
  // the middle.
  for (const std::string& table : tables) {
    const std::string path = dir_.Join(table);
    std::string bytes;
    {
      std::ifstream in(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    size_t at = bytes.find("second 2");
    if (at == std::string::npos) at = bytes.size() / 4;
    bytes[at] ^= 0x20;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), bytes.size());
  }
  absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Open(dir_.path(), {});
  absl::Status status = journal.status();
  if (journal.ok()) {
    absl::StatusOr<Journal::Recovered> recovered = (*journal)->Recover();
    EXPECT_FALSE(recovered.ok()) << "recovered " << recovered->records.size() << " records";
    status = recovered.status();
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(Prefix())) << status;
  if (journal.ok()) {
    EXPECT_THAT(std::string(status.message()), HasSubstr("record ")) << status;
  }
}

TEST_F(LostFilesTest, DeletedTableFilesAreDataLoss) {
  WriteTwoSessions();
  ExpectRecoversTen();
  for (const std::string& sst : FilesEndingWith(dir_.path(), ".sst")) {
    ASSERT_TRUE(std::filesystem::remove(dir_.Join(sst)));
  }
  const absl::Status status = OpenError(dir_.path());
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
}

TEST_F(LostFilesTest, EverythingButTheHighWaterFileDeletedIsDataLoss) {
  WriteTwoSessions();
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    if (entry.path().filename() != jf::kHighWaterFileName) std::filesystem::remove(entry.path());
  }
  const absl::Status status = OpenError(dir_.path());
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("records 1..10 lost"));
}

// A journal written before the high-water file existed (marker, records, no file, no 'w' key)
// opens, gets the file, and from then on its loss is detected.
TEST_F(LostFilesTest, JournalOlderThanTheHighWaterFileIsUpgraded) {
  WriteTwoSessions();
  ASSERT_TRUE(std::filesystem::remove(dir_.Join(jf::kHighWaterFileName)));
  {
    RawDb raw(dir_.path());
    raw.Delete(jf::kHighWaterFileKey);
  }
  ExpectRecoversTen();
  ASSERT_TRUE(std::filesystem::exists(dir_.Join(jf::kHighWaterFileName)));
  ASSERT_TRUE(std::filesystem::remove(dir_.Join(jf::kHighWaterFileName)));
  EXPECT_EQ(OpenError(dir_.path()).code(), absl::StatusCode::kDataLoss);
}

TEST_F(LostFilesTest, DeletedHighWaterFileIsDataLossNamingIt) {
  WriteTwoSessions();
  ASSERT_TRUE(std::filesystem::remove(dir_.Join(jf::kHighWaterFileName)));
  const absl::Status status = OpenError(dir_.path());
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(Prefix() + jf::kHighWaterFileName + " missing"));
}

// ---------------------------------------------------------------------------------------------
// Deleted under a running journal ("Deleted under it" in journal.h).

class DeletedWhileOpenTest : public JournalTest {
 protected:
  // A journal with records 1..3, open; `remove` then deletes some of its files; the next
  // Append must be Unavailable naming the directory and `what`, and so must every later write.
  void ExpectFailStopAfter(const std::function<void()>& remove, const std::string& what) {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    AppendAll(*journal, Payloads(3), 1);
    remove();
    const absl::StatusOr<uint64_t> seq = journal->Append("after the deletion");
    ASSERT_FALSE(seq.ok()) << "acknowledged as record " << *seq << " after " << what;
    EXPECT_EQ(seq.status().code(), absl::StatusCode::kUnavailable) << seq.status();
    EXPECT_THAT(std::string(seq.status().message()), HasSubstr(Prefix() + what));
    EXPECT_THAT(std::string(seq.status().message()), HasSubstr("records 1..3 are lost"));
    const absl::StatusOr<uint64_t> later = journal->Append("later");
    EXPECT_EQ(later.status().code(), absl::StatusCode::kUnavailable) << "not fail-stop";
    EXPECT_EQ(journal->WriteSnapshot(3, "state").code(), absl::StatusCode::kUnavailable);
  }
  std::string Marker() const { return dir_.Join(jf::kLostMarkerFileName); }
};

TEST_F(DeletedWhileOpenTest, RemovedDirectoryFailsStopAndLeavesTheLostMarker) {
  ExpectFailStopAfter([&] { std::filesystem::remove_all(dir_.path()); },
                      "the journal directory was deleted");
  // Recreated holding only the marker, which names what was acknowledged.
  ASSERT_TRUE(std::filesystem::exists(Marker()));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_.path()),
                          std::filesystem::directory_iterator()),
            1);
  std::ifstream in(Marker());
  const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(said, HasSubstr("records 1..3 had been acknowledged and are lost"));
}

TEST_F(DeletedWhileOpenTest, DeletedHighWaterFileFailsStop) {
  ExpectFailStopAfter(
      [&] { ASSERT_TRUE(std::filesystem::remove(dir_.Join(jf::kHighWaterFileName))); },
      absl::StrCat(jf::kHighWaterFileName, " was deleted"));
  EXPECT_FALSE(std::filesystem::exists(Marker())) << "the directory is still there";
}

TEST_F(DeletedWhileOpenTest, DeletedWalFailsStop) {
  ExpectFailStopAfter(
      [&] { ASSERT_TRUE(std::filesystem::remove(dir_.Join(NewestWal(dir_.path())))); },
      "the current WAL was deleted");
}

TEST_F(DeletedWhileOpenTest, ReplacedDirectoryFailsStopAndIsLeftAlone) {
  testing::ScopedTempDir elsewhere;
  ExpectFailStopAfter(
      [&] {
        std::filesystem::rename(dir_.path(), elsewhere.Join("moved"));
        std::filesystem::create_directory(dir_.path());
      },
      "the journal directory was replaced by another");
  EXPECT_FALSE(std::filesystem::exists(Marker())) << "it may be a restored copy";
}

TEST_F(DeletedWhileOpenTest, AnIntactJournalClosesWithoutTheMarker) {
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    AppendAll(*journal, Payloads(3), 1);
  }
  EXPECT_FALSE(std::filesystem::exists(Marker()));
  std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
  ASSERT_NE(journal, nullptr);
  EXPECT_EQ(journal->last_sequence(), 3u);
}

TEST_F(DeletedWhileOpenTest, ADeletionFirstNoticedAtCloseLeavesTheMarkerToo) {
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    AppendAll(*journal, Payloads(2), 1);
    std::filesystem::remove_all(dir_.path());
  }
  const absl::Status status = OpenError(dir_.path());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("records 1..2 had been acknowledged"));
}

TEST_F(DeletedWhileOpenTest, ReopeningOverTheMarkerIsRefusedUnlessAcceptLost) {
  ExpectFailStopAfter([&] { std::filesystem::remove_all(dir_.path()); },
                      "the journal directory was deleted");
  const absl::Status refused = OpenError(dir_.path());
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr(Prefix() + jf::kLostMarkerFileName));
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("records 1..3 had been acknowledged and are lost"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("--new_cluster"));
  EXPECT_EQ(OpenError(dir_.path()).code(), absl::StatusCode::kFailedPrecondition)
      << "refusing changed nothing";

  JournalOptions start_over;
  start_over.accept_lost = true;
  std::unique_ptr<Journal> journal = OpenJournal(dir_.path(), start_over);
  ASSERT_NE(journal, nullptr);
  EXPECT_EQ(journal->last_sequence(), 0u);
  EXPECT_FALSE(std::filesystem::exists(Marker()));
  AppendAll(*journal, Payloads(1), 1);
}

// Every length the newest WAL or the MANIFEST can be truncated to either loses nothing (Open
// and Recover return records 1..10) or is DataLoss: never fewer records, never "not a Granary
// journal".
class TruncationSweepTest : public LostFilesTest {
 protected:
  void Sweep(const std::string& victim_name, bool manifest) {
    const std::string pristine = scratch_.Join("pristine");
    std::filesystem::copy(dir_.path(), pristine, std::filesystem::copy_options::recursive);
    const uintmax_t size = std::filesystem::file_size(dir_.Join(victim_name));
    int data_loss = 0;
    for (uintmax_t length = 0; length < size; length += 3) {
      SCOPED_TRACE(absl::StrCat(victim_name, " truncated to ", length, " of ", size, " bytes"));
      std::filesystem::remove_all(dir_.path());
      std::filesystem::copy(pristine, dir_.path(), std::filesystem::copy_options::recursive);
      TruncateFile(dir_.Join(victim_name), length);
      absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Open(dir_.path(), {});
      absl::Status status = journal.status();
      if (journal.ok()) {
        absl::StatusOr<Journal::Recovered> recovered = (*journal)->Recover();
        status = recovered.status();
        if (recovered.ok()) {
          EXPECT_EQ(recovered->records.size(), 10u);
          continue;
        }
      }
      EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
      ++data_loss;
    }
    EXPECT_GT(data_loss, 0) << (manifest ? "MANIFEST" : "WAL") << " damage never detected";
  }
  testing::ScopedTempDir scratch_;
};

TEST_F(TruncationSweepTest, NewestWal) {
  WriteTwoSessions();
  Sweep(NewestWal(dir_.path()), /*manifest=*/false);
}

TEST_F(TruncationSweepTest, Manifest) {
  WriteTwoSessions();
  ExpectRecoversTen();
  const std::vector<std::string> manifests = FilesEndingWith(dir_.path(), "", "MANIFEST-");
  ASSERT_FALSE(manifests.empty());
  Sweep(manifests.back(), /*manifest=*/true);
}

TEST_F(TruncationSweepTest, ManifestWithRecordsStillInTheWal) {
  WriteTwoSessions();
  const std::vector<std::string> manifests = FilesEndingWith(dir_.path(), "", "MANIFEST-");
  ASSERT_FALSE(manifests.empty());
  Sweep(manifests.back(), /*manifest=*/true);
}

// A crash while a batch was being written leaves an incomplete last WAL record that was never
// acknowledged (the high-water file does not vouch for it): it is dropped, not DataLoss.
TEST_F(LostFilesTest, IncompleteUnacknowledgedLastRecordIsDropped) {
  std::string mark_before_last;
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
    ASSERT_NE(journal, nullptr);
    AppendAll(*journal, Payloads(9), 1);
    std::ifstream in(dir_.Join(jf::kHighWaterFileName), std::ios::binary);
    mark_before_last.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    AppendAll(*journal, {"never acknowledged"}, 10);
  }
  // As if the process died inside the last write: its record is torn, its mark never written.
  {
    std::ofstream out(dir_.Join(jf::kHighWaterFileName), std::ios::binary | std::ios::trunc);
    out.write(mark_before_last.data(), mark_before_last.size());
  }
  const std::string wal = dir_.Join(NewestWal(dir_.path()));
  TruncateFile(wal, std::filesystem::file_size(wal) - 7);
  std::unique_ptr<Journal> journal = OpenJournal(dir_.path());
  ASSERT_NE(journal, nullptr);
  absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->records, Numbered(Payloads(9), 1));
  AppendAll(*journal, {"ten"}, 10);
}

// ---------------------------------------------------------------------------------------------
// A full disk (issue 13, defect 6), for real: a 4 MiB tmpfs filled up by a file.

std::string BigPayload(int i) {
  return absl::StrCat("payload ", i, " ", std::string(16 << 10, 'p'));
}

// Appends until one fails (RocksDB may have preallocated WAL space beyond the filled disk) and
// returns that failure; acknowledged records are added to `acked`.
absl::Status AppendUntilFailure(Journal& journal, Records& acked) {
  for (int i = 0; i < 2000; ++i) {
    const std::string payload = BigPayload(static_cast<int>(acked.size()));
    absl::StatusOr<uint64_t> seq = journal.Append(payload);
    if (!seq.ok()) return seq.status();
    EXPECT_EQ(*seq, acked.size() + 1);
    acked.emplace_back(*seq, payload);
  }
  return absl::OkStatus();
}

// With the disk full an Append fails with Unavailable saying so, without changing the journal;
// reads keep working; once space returns Appends (and snapshots) work again, numbered right
// after the last acknowledged record, and every acknowledged record survives a reopen. Run
// with 0 and 3 appends between opening (which empties RocksDB's memtable) and filling the
// disk.
TEST(FullDiskJournalTest, AppendFailsUntilSpaceReturnsAndNothingAcknowledgedIsLost) {
  for (int appends_before_fill : {0, 3}) {
    SCOPED_TRACE(absl::StrCat(appends_before_fill, " appends before the disk fills"));
    testing::ScopedTmpfs fs(4 << 20);
    if (!fs.ok()) GTEST_SKIP() << fs.skip_reason();
    const std::string dir = fs.Join("journal");
    Records acked;
    {
      std::unique_ptr<Journal> journal = OpenJournal(dir);
      ASSERT_NE(journal, nullptr);
      AppendAll(*journal, {"first"}, 1);
      acked.emplace_back(1, "first");
    }
    {
      std::unique_ptr<Journal> journal = OpenJournal(dir);
      ASSERT_NE(journal, nullptr);
      for (int i = 0; i < appends_before_fill; ++i) {
        const std::string payload = absl::StrCat("before ", i);
        AppendAll(*journal, {payload}, acked.size() + 1);
        acked.emplace_back(acked.size() + 1, payload);
      }
      fs.Fill("filler");
      const absl::Status failure = AppendUntilFailure(*journal, acked);
      ASSERT_FALSE(failure.ok()) << "the disk never filled";
      EXPECT_EQ(failure.code(), absl::StatusCode::kUnavailable) << failure;
      EXPECT_THAT(std::string(failure.message()), HasSubstr("out of disk space")) << failure;
      EXPECT_EQ(journal->last_sequence(), acked.size());

      // Still full: appends and snapshots keep failing the same way; reads work.
      EXPECT_EQ(journal->Append("while full").status().code(), absl::StatusCode::kUnavailable);
      EXPECT_EQ(journal->WriteSnapshot(acked.size(), "while full").code(),
                absl::StatusCode::kUnavailable);
      absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
      ASSERT_TRUE(recovered.ok()) << recovered.status();
      EXPECT_EQ(recovered->records, acked);

      // Space returns: writing resumes right after the last acknowledged record.
      ASSERT_TRUE(std::filesystem::remove(fs.Join("filler")));
      absl::StatusOr<uint64_t> seq = journal->Append("after");
      ASSERT_TRUE(seq.ok()) << seq.status();
      EXPECT_EQ(*seq, acked.size() + 1);
      acked.emplace_back(*seq, "after");
      recovered = journal->Recover();
      ASSERT_TRUE(recovered.ok()) << recovered.status();
      EXPECT_EQ(recovered->records, acked);
    }
    std::unique_ptr<Journal> journal = OpenJournal(dir);
    ASSERT_NE(journal, nullptr);
    absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
    ASSERT_TRUE(recovered.ok()) << recovered.status();
    EXPECT_EQ(recovered->records, acked);
    ASSERT_TRUE(journal->WriteSnapshot(acked.size(), "state").ok());
    AppendAll(*journal, {"last"}, acked.size() + 1);
  }
}

// The disk fills, and the operator frees space by deleting the journal directory: resuming
// must not reopen RocksDB over the empty place (that would be a new, empty journal) but fail
// stop, leave the lost-journal marker, and so make the next Open refuse.
TEST(FullDiskJournalTest, AJournalDeletedToFreeSpaceIsNotReopenedEmpty) {
  testing::ScopedTmpfs fs(4 << 20);
  if (!fs.ok()) GTEST_SKIP() << fs.skip_reason();
  const std::string dir = fs.Join("journal");
  Records acked;
  std::unique_ptr<Journal> journal = OpenJournal(dir);
  ASSERT_NE(journal, nullptr);
  AppendAll(*journal, {"first"}, 1);
  acked.emplace_back(1, "first");
  fs.Fill("filler");
  const absl::Status full = AppendUntilFailure(*journal, acked);
  ASSERT_TRUE(absl::IsUnavailable(full)) << full;
  ASSERT_THAT(std::string(full.message()), HasSubstr("out of disk space"));

  std::filesystem::remove_all(dir);
  ASSERT_TRUE(std::filesystem::remove(fs.Join("filler")));
  const absl::StatusOr<uint64_t> seq = journal->Append("after the deletion");
  ASSERT_FALSE(seq.ok()) << "acknowledged as record " << *seq << " in a journal made anew";
  EXPECT_TRUE(absl::IsUnavailable(seq.status())) << seq.status();
  EXPECT_THAT(std::string(seq.status().message()),
              HasSubstr(absl::StrCat("records 1..", acked.size(), " are lost")));
  EXPECT_TRUE(absl::IsUnavailable(journal->Append("later").status())) << "not fail-stop";
  journal.reset();
  ASSERT_TRUE(std::filesystem::exists(absl::StrCat(dir, "/", jf::kLostMarkerFileName)));
  const absl::StatusOr<std::unique_ptr<Journal>> reopened = Journal::Open(dir, JournalOptions());
  ASSERT_FALSE(reopened.ok()) << "a new, empty journal over a lost one";
  EXPECT_TRUE(absl::IsFailedPrecondition(reopened.status())) << reopened.status();
}

// Opening a journal on a full disk fails with an error (RocksDB must write to open), and opens
// once space returns.
TEST(FullDiskJournalTest, OpenOnAFullDiskFailsClearly) {
  testing::ScopedTmpfs fs(4 << 20);
  if (!fs.ok()) GTEST_SKIP() << fs.skip_reason();
  const std::string dir = fs.Join("journal");
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir);
    ASSERT_NE(journal, nullptr);
    AppendAll(*journal, Payloads(3), 1);
  }
  fs.Fill("filler");
  absl::StatusOr<std::unique_ptr<Journal>> full = Journal::Open(dir, JournalOptions{});
  if (!full.ok()) {
    EXPECT_EQ(full.status().code(), absl::StatusCode::kUnavailable) << full.status();
    EXPECT_THAT(std::string(full.status().message()), HasSubstr("out of disk space"));
  }
  full = absl::UnavailableError("closed");
  ASSERT_TRUE(std::filesystem::remove(fs.Join("filler")));
  std::unique_ptr<Journal> journal = OpenJournal(dir);
  ASSERT_NE(journal, nullptr);
  absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->records, Numbered(Payloads(3), 1));
}

// Eight threads append while the disk fills, keep appending while it is full, and go on after
// space returns: every acknowledged append is recovered under its sequence number after a
// reopen, refused appends are not, and numbers stay contiguous (exactly once).
TEST(FullDiskJournalTest, ConcurrentAppendsAcrossAFullDiskAreExactlyOnce) {
  // Resuming needs free room for the WAL written so far (Journal::ReopenAfterNoSpace), and the
  // appends go on while the filler is written: on a 4 MiB tmpfs a slow fill (a loaded machine)
  // could leave the WAL too large to ever resume. 32 MiB leaves room for any fill.
  testing::ScopedTmpfs fs(32 << 20);
  if (!fs.ok()) GTEST_SKIP() << fs.skip_reason();
  const std::string dir = fs.Join("journal");
  constexpr int kThreads = 8;
  absl::Mutex mu;
  std::map<uint64_t, std::string> acked;  // Guarded by mu.
  int64_t refused = 0;                    // Guarded by mu.
  {
    std::unique_ptr<Journal> journal = OpenJournal(dir);
    ASSERT_NE(journal, nullptr);
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int64_t i = 0; !stop.load(); ++i) {
          const std::string payload =
              absl::StrCat("thread ", t, " append ", i, " ", std::string(4096, 'p'));
          absl::StatusOr<uint64_t> seq = journal->Append(payload);
          if (seq.ok()) {
            absl::MutexLock lock(&mu);
            EXPECT_TRUE(acked.emplace(*seq, payload).second) << "seq " << *seq << " twice";
          } else {
            EXPECT_EQ(seq.status().code(), absl::StatusCode::kUnavailable) << seq.status();
            absl::MutexLock lock(&mu);
            ++refused;
          }
        }
      });
    }
    // Waits (at most 30 s) until `done` holds under mu.
    auto wait_for = [&](std::function<bool()> done) {
      absl::MutexLock lock(&mu);
      return mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(30));
    };
    EXPECT_TRUE(wait_for([&] { return acked.size() >= 20; }));
    fs.Fill("filler");
    EXPECT_TRUE(wait_for([&] { return refused >= 50; })) << "the disk never filled";
    EXPECT_TRUE(std::filesystem::remove(fs.Join("filler")));  // (No ASSERT: join first.)
    size_t before;
    {
      absl::MutexLock lock(&mu);
      before = acked.size();
    }
    EXPECT_TRUE(wait_for([&] { return acked.size() >= before + 50; })) << "appends did not resume";
    stop = true;
    for (std::thread& thread : threads) thread.join();
  }
  EXPECT_GE(refused, 50);
  std::unique_ptr<Journal> journal = OpenJournal(dir);
  ASSERT_NE(journal, nullptr);
  absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_EQ(recovered->records.size(), acked.size());
  for (const auto& [seq, payload] : recovered->records) {
    auto it = acked.find(seq);
    ASSERT_NE(it, acked.end()) << "record " << seq << " was never acknowledged";
    EXPECT_EQ(it->second, payload) << "record " << seq;
  }
}

}  // namespace
}  // namespace granary
