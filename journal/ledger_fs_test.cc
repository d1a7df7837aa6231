// The journal through a LedgerFileSystem in a process that is SIGKILLed mid-append, then
// loses power (common/sync_ledger.h's ApplyPowerLoss): every acknowledged record survives,
// unacknowledged ones may vanish, and the journal reopens.
#include "journal/ledger_fs.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "journal/journal.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

std::string RecordPayload(uint64_t seq) { return absl::StrCat("record ", seq); }

// In a child process: opens the journal in `dir` recording in the ledger at `ledger_path`, and
// appends from 4 threads (thread 0 also writes a snapshot every 16 records or so) until it is
// killed, writing each acknowledged sequence number (8 bytes) to `acks`. Exits 1 on an error.
[[noreturn]] void RunWriter(const std::string& dir, const std::string& ledger_path, int acks) {
  absl::StatusOr<std::unique_ptr<SyncLedger>> ledger = SyncLedger::Open(ledger_path);
  if (!ledger.ok()) ::_exit(1);
  JournalOptions options;
  options.sync_ledger = ledger->get();
  absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Open(dir, options);
  if (!journal.ok()) {
    std::fprintf(stderr, "writer: %s\n", journal.status().ToString().c_str());
    ::_exit(1);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      uint64_t snapshot = 0;  // thread 0's last: its sequence numbers only grow
      while (true) {
        // A record's payload names its sequence number: the next one, as far as this thread
        // can tell; the reader checks the payloads only of records whose number it names.
        const uint64_t next = (*journal)->last_sequence() + 1;
        absl::StatusOr<uint64_t> seq = (*journal)->Append(RecordPayload(next));
        if (!seq.ok()) ::_exit(1);
        if (t == 0 && *seq >= snapshot + 16) {
          snapshot = *seq;
          if (!(*journal)->WriteSnapshot(snapshot, absl::StrCat("snapshot ", snapshot)).ok()) {
            ::_exit(1);
          }
        }
        if (::write(acks, &*seq, sizeof(*seq)) != sizeof(*seq)) ::_exit(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ::_exit(1);
}

// One incarnation: a writer appends until `until` records are acknowledged, is SIGKILLed and
// loses power. Returns the highest acknowledged sequence number.
uint64_t WriteAndLosePower(const std::string& dir, const std::string& ledger_path, uint64_t until,
                           std::optional<uint64_t> torn_seed, PowerLossReport* dropped) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    RunWriter(dir, ledger_path, fds[1]);
  }
  ::close(fds[1]);
  uint64_t acknowledged = 0;
  uint64_t seq;
  bool killed = false;
  while (::read(fds[0], &seq, sizeof(seq)) == sizeof(seq)) {
    acknowledged = std::max(acknowledged, seq);
    if (!killed && acknowledged >= until) {
      ::kill(pid, SIGKILL);  // The acks already in the pipe still count.
      killed = true;
    }
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the writer exited by itself (status " << status << ")";
  *dropped = ApplyPowerLoss({ledger_path}, torn_seed).value();
  return acknowledged;
}

void ExpectJournalHolds(const std::string& dir, uint64_t acknowledged) {
  absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Open(dir, JournalOptions());
  ASSERT_TRUE(journal.ok()) << journal.status();
  EXPECT_GE((*journal)->last_sequence(), acknowledged);
  const Journal::Recovered recovered = (*journal)->Recover().value();
  if (recovered.has_snapshot) {
    EXPECT_EQ(recovered.snapshot, absl::StrCat("snapshot ", recovered.snapshot_seq));
  }
  uint64_t expected = recovered.snapshot_seq + 1;
  for (const auto& [seq, payload] : recovered.records) {
    EXPECT_EQ(seq, expected++);
    EXPECT_THAT(payload, ::testing::StartsWith("record "));
  }
  EXPECT_EQ(expected - 1, (*journal)->last_sequence());
}

class JournalPowerLossTest : public ::testing::TestWithParam<bool> {};

TEST_P(JournalPowerLossTest, AcknowledgedRecordsSurviveRepeatedPowerLosses) {
  const bool torn = GetParam();
  int64_t dropped_anything = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed, torn ? ", torn" : ""));
    testing::ScopedTempDir root;
    const std::string dir = root.Join("journal");
    uint64_t acknowledged = 0;
    // Three incarnations, each recovering what the previous one's power loss left.
    for (int incarnation = 1; incarnation <= 3; ++incarnation) {
      SCOPED_TRACE(absl::StrCat("incarnation ", incarnation));
      PowerLossReport dropped;
      const uint64_t acked = WriteAndLosePower(
          dir, root.Join(absl::StrCat("ledger.", incarnation)), acknowledged + 20 + seed * 7 % 30,
          torn ? std::optional<uint64_t>(seed * 100 + incarnation) : std::nullopt, &dropped);
      ASSERT_GE(acked, acknowledged);
      acknowledged = acked;
      dropped_anything += dropped.bytes_dropped + dropped.files_reverted;
      ExpectJournalHolds(dir, acknowledged);
      if (HasFatalFailure()) return;
    }
  }
  // The writers were killed mid-write: some unsynced WAL tail or high-water update was there to
  // drop.
  EXPECT_GT(dropped_anything, 0);
}

INSTANTIATE_TEST_SUITE_P(TornOrNot, JournalPowerLossTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Torn" : "Dropped";
                         });

}  // namespace
}  // namespace granary
