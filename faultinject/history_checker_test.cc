// The history checker on hand-written histories: a clean one passes (a client restart that
// rolls deliveries back, a dispatcher restart, a pruned checkpoint), and each rule finds the
// violation it names.
#include "faultinject/history_checker.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/history_log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// One line to write: its time, op, phase and fields (seq and process are the file's).
struct Line {
  int64_t ns;
  std::string op;
  std::string phase;
  std::string fields;
};

class HistoryCheckerTest : public ::testing::Test {
 protected:
  // Writes `lines` as <process>.<incarnation>.tsv, numbering them from 1; `torn` is appended
  // without a newline.
  void Write(const std::string& file, const std::vector<Line>& lines,
             const std::string& torn = "") {
    const std::string process = file.substr(0, file.find('.'));
    std::string text;
    int64_t seq = 0;
    for (const Line& l : lines) {
      absl::StrAppend(&text, l.ns, "\t", ++seq, "\t", process, "\t", l.op, "\t", l.phase, "\t",
                      l.fields, "\n");
    }
    text += torn;
    ASSERT_TRUE(WriteStringToFile(Env::Default(), dir_.Join(file), text, false).ok());
  }

  std::vector<HistoryViolation> Check() {
    absl::StatusOr<std::vector<HistoryViolation>> violations = CheckHistory(dir_.path());
    EXPECT_TRUE(violations.ok()) << violations.status();
    return violations.ok() ? *violations : std::vector<HistoryViolation>();
  }

  // Expects exactly one violation, of `rule`, whose message has `text`.
  void ExpectOnly(const std::string& rule, const std::string& text) {
    const std::vector<HistoryViolation> violations = Check();
    ASSERT_EQ(violations.size(), 1u) << Messages(violations);
    EXPECT_EQ(violations[0].rule, rule) << violations[0].message;
    EXPECT_THAT(violations[0].message, HasSubstr(text));
  }

  static std::string Messages(const std::vector<HistoryViolation>& violations) {
    std::string out;
    for (const auto& v : violations) absl::StrAppend(&out, v.rule, ": ", v.message, "\n");
    return out;
  }

  // A dispatcher's first incarnation: epoch 0 of job 1 with tasks 1 (worker-0) and 2
  // (worker-1), splits 10-13 leased, records 1-3 committed.
  void WriteDispatcher() {
    Write(
        "dispatcher.0.tsv",
        {{100, "journal_recover", "invoke", ""},
         {110, "journal_recover", "ok", "last_seq=0 snapshot_seq=0"},
         {120, "journal_commit", "ok", "seq=1 crc=11"},
         {130, "assign", "ok", "job=1 epoch=0 consumer=0 task=1 gen=1 worker=worker-0"},
         {131, "assign", "ok", "job=1 epoch=0 consumer=0 task=2 gen=1 worker=worker-1"},
         {140, "journal_commit", "ok", "seq=2 crc=22"},
         {150, "lease", "ok", "job=1 epoch=0 consumer=0 task=1 gen=1 worker=worker-0 splits=10,11"},
         {160, "journal_commit", "ok", "seq=3 crc=33"},
         {170, "lease", "ok",
          "job=1 epoch=0 consumer=0 task=2 gen=1 worker=worker-1 splits=12,13"}});
  }

  testing::ScopedTempDir dir_;
};

// Everything a clean run of two tasks of 3 elements does, with a client killed after it
// delivered task 1's elements 0-2 and task 2's element 0 but saved only 1:2,2:0: the restarted
// client resumes there and delivers task 2's element 0 again (not a duplicate: rolled back).
// The dispatcher restarts too and recovers every record; worker-0 restarts and restores task 1
// from its newest checkpoint at or before the reader's index.
TEST_F(HistoryCheckerTest, CleanHistoryPasses) {
  WriteDispatcher();
  Write("dispatcher.1.tsv", {{400, "journal_recover", "invoke", ""},
                             {401, "journal_replay", "ok", "seq=2 crc=22"},
                             {402, "journal_replay", "ok", "seq=3 crc=33"},
                             {410, "journal_recover", "ok", "last_seq=3 snapshot_seq=1"},
                             {420, "journal_commit", "ok", "seq=4 crc=44"}});
  Write("worker-0.0.tsv", {{180, "task_start", "ok", "task=1 gen=1 from=0 restored=0"},
                           {200, "checkpoint", "ok", "task=1 gen=1 index=1"},
                           {260, "checkpoint", "ok", "task=1 gen=1 index=2"}});
  Write("worker-0.1.tsv", {{450, "task_start", "ok", "task=1 gen=1 from=2 restored=2"}});
  Write("worker-1.0.tsv", {{181, "task_start", "ok", "task=2 gen=1 from=0 restored=0"}});
  const std::string epoch = "job=1 epoch=0 consumer=0";
  Write("client.0.tsv",
        {{190, "read_epoch", "info", epoch + " restored="},
         {210, "deliver", "ok", epoch + " task=1 index=0 gen=1"},
         {220, "deliver", "ok", epoch + " task=1 index=1 gen=1"},
         {230, "deliver", "ok", epoch + " task=2 index=0 gen=1"},
         {240, "deliver", "ok", epoch + " task=1 index=2 gen=1"}},
        /*torn=*/"250\t6\tclient\tdeliv");
  Write("client.1.tsv", {{500, "read_epoch", "info", epoch + " restored=1:3,2:0"},
                         {505, "task_done", "info", epoch + " task=1 elements=3"},
                         {510, "deliver", "ok", epoch + " task=2 index=0 gen=1"},
                         {511, "drop_dup", "info", epoch + " task=2 count=1 below=1"},
                         {520, "deliver", "ok", epoch + " task=2 index=1 gen=1"},
                         {530, "deliver", "ok", epoch + " task=2 index=2 gen=1"},
                         {540, "task_done", "info", epoch + " task=2 elements=3"}});
  Write("harness.0.tsv", {{300, "kill", "info", "process=client"},
                          {301, "kill", "info", "process=dispatcher"},
                          {302, "kill", "info", "process=worker-0"}});
  EXPECT_THAT(Check(), IsEmpty()) << Messages(Check());
}

TEST_F(HistoryCheckerTest, ElementDeliveredTwiceIsFound) {
  const std::string epoch = "job=1 epoch=0 consumer=0";
  Write("client.0.tsv", {{190, "read_epoch", "info", epoch + " restored="},
                         {210, "deliver", "ok", epoch + " task=1 index=0 gen=1"},
                         {220, "deliver", "ok", epoch + " task=1 index=0 gen=2"},
                         {230, "task_done", "info", epoch + " task=1 elements=1"}});
  ExpectOnly("exactly_once", "task 1 element 0 delivered twice (first: client.0.tsv seq 2)");
}

TEST_F(HistoryCheckerTest, ElementSavedByAnEarlierClientAndDeliveredAgainIsFound) {
  const std::string epoch = "job=1 epoch=0 consumer=0";
  Write("client.0.tsv", {{190, "read_epoch", "info", epoch + " restored="},
                         {210, "deliver", "ok", epoch + " task=1 index=0 gen=1"}});
  // Resumed after element 0, yet it is delivered again: the trainer sees it twice.
  Write("client.1.tsv", {{300, "read_epoch", "info", epoch + " restored=1:1"},
                         {310, "deliver", "ok", epoch + " task=1 index=0 gen=1"},
                         {320, "task_done", "info", epoch + " task=1 elements=1"}});
  ExpectOnly("exactly_once", "task 1 element 0 delivered twice");
}

TEST_F(HistoryCheckerTest, ElementNeverDeliveredIsFound) {
  const std::string epoch = "job=1 epoch=0 consumer=0";
  Write("client.0.tsv", {{190, "read_epoch", "info", epoch + " restored="},
                         {210, "deliver", "ok", epoch + " task=1 index=0 gen=1"},
                         {220, "deliver", "ok", epoch + " task=1 index=2 gen=1"},
                         {230, "task_done", "info", epoch + " task=1 elements=3"}});
  ExpectOnly("exactly_once", "task 1 element 1 of 3 never delivered");
}

TEST_F(HistoryCheckerTest, ResumedPositionCountingAnUndeliveredElementIsFound) {
  const std::string epoch = "job=1 epoch=0 consumer=0";
  Write("client.0.tsv", {{190, "read_epoch", "info", epoch + " restored="},
                         {210, "deliver", "ok", epoch + " task=1 index=0 gen=1"}});
  Write("client.1.tsv", {{300, "read_epoch", "info", epoch + " restored=1:2"},
                         {320, "task_done", "info", epoch + " task=1 elements=2"}});
  const std::vector<HistoryViolation> violations = Check();
  ASSERT_FALSE(violations.empty());
  EXPECT_EQ(violations[0].rule, "exactly_once");
  EXPECT_THAT(violations[0].message,
              HasSubstr("the resumed position counts task 1 element 1 as delivered, but it "
                        "never was"));
}

// Equal shares (issue 34): an element the reader read and dropped by the remainder rule drop
// (deliver … dropped) is accounted for as a delivered one is; padding (pad) is no element. A
// client killed while it dropped resumes past the dropped elements its position counts.
TEST_F(HistoryCheckerTest, ElementsDroppedByTheRemainderRuleAndPaddingAreAccounted) {
  const std::string epoch = "job=1 epoch=0 consumer=1";
  Write("client-1.0.tsv", {{190, "read_epoch", "info", epoch + " restored="},
                           {210, "deliver", "ok", epoch + " task=1 index=0 gen=1"},
                           {220, "deliver", "dropped", epoch + " task=1 index=1 gen=1"},
                           {230, "deliver", "dropped", epoch + " task=1 index=2 gen=1"}});
  Write("client-1.1.tsv", {{300, "read_epoch", "info", epoch + " restored=1:2"},
                           {310, "deliver", "dropped", epoch + " task=1 index=2 gen=1"},
                           {320, "task_done", "info", epoch + " task=1 elements=3"}});
  const std::string other = "job=1 epoch=0 consumer=0";
  Write("client-0.0.tsv", {{190, "read_epoch", "info", other + " restored="},
                           {210, "deliver", "ok", other + " task=2 index=0 gen=1"},
                           {220, "task_done", "info", other + " task=2 elements=1"},
                           {230, "pad", "info", other + " padded=1"}});
  EXPECT_THAT(Check(), IsEmpty()) << Messages(Check());
}

TEST_F(HistoryCheckerTest, ElementDroppedThenDeliveredIsFound) {
  const std::string epoch = "job=1 epoch=0 consumer=0";
  Write("client.0.tsv", {{190, "read_epoch", "info", epoch + " restored="},
                         {210, "deliver", "dropped", epoch + " task=1 index=0 gen=1"},
                         {220, "deliver", "ok", epoch + " task=1 index=0 gen=1"},
                         {230, "task_done", "info", epoch + " task=1 elements=1"}});
  ExpectOnly("exactly_once", "task 1 element 0 delivered twice");
}

TEST_F(HistoryCheckerTest, TaskReadByTwoConsumersIsFound) {
  Write("client.0.tsv", {{210, "deliver", "ok", "job=1 epoch=0 consumer=0 task=1 index=0 gen=1"},
                         {220, "deliver", "ok", "job=1 epoch=0 consumer=1 task=1 index=1 gen=1"}});
  ExpectOnly("exactly_once", "task 1 delivered to consumer 1 and to consumer 0");
}

TEST_F(HistoryCheckerTest, AcknowledgedJournalRecordLostAcrossARestartIsFound) {
  WriteDispatcher();
  Write("dispatcher.1.tsv", {{400, "journal_recover", "invoke", ""},
                             {401, "journal_replay", "ok", "seq=2 crc=22"},
                             {410, "journal_recover", "ok", "last_seq=2 snapshot_seq=1"}});
  ExpectOnly("journal_lost",
             "dispatcher.1.tsv recovered the journal up to record 2, but record 3 was committed "
             "(dispatcher.0.tsv seq 8) before the recovery began");
}

TEST_F(HistoryCheckerTest, AcknowledgedJournalRecordReplacedIsFound) {
  WriteDispatcher();
  Write("dispatcher.1.tsv", {{400, "journal_recover", "invoke", ""},
                             {401, "journal_replay", "ok", "seq=2 crc=22"},
                             {402, "journal_replay", "ok", "seq=3 crc=99"},
                             {410, "journal_recover", "ok", "last_seq=3 snapshot_seq=1"}});
  ExpectOnly("journal_lost",
             "journal record 3: journal_replay by dispatcher.1.tsv has CRC 99, "
             "but journal_commit by dispatcher.0.tsv had CRC 33");
}

TEST_F(HistoryCheckerTest, AcknowledgedCheckpointLostIsFound) {
  Write("worker-0.0.tsv", {{180, "task_start", "ok", "task=1 gen=1 from=0 restored=0"},
                           {200, "checkpoint", "ok", "task=1 gen=1 index=4"}});
  // Restarted with the reader at 6: the checkpoint at 4 must be restored.
  Write("worker-0.1.tsv", {{450, "task_start", "ok", "task=1 gen=1 from=6 restored=0"}});
  ExpectOnly("checkpoint_lost",
             "task 1 generation 1 restored at element 0 (reader at 6), but a checkpoint at 4 was "
             "acknowledged before");
}

TEST_F(HistoryCheckerTest, CheckpointsTheWorkerFoundUnusableNeedNotRestoreThatStartOnly) {
  // The worker could not read its checkpoints (its disk failing) right before its start at 6:
  // a recompute from 0. Its next start at 8, with no such report, must restore the one at 4.
  Write("worker-0.0.tsv", {{180, "task_start", "ok", "task=1 gen=1 from=0 restored=0"},
                           {200, "checkpoint", "ok", "task=1 gen=1 index=4"},
                           {440, "checkpoint_unusable", "info", "task=1 code=INTERNAL"},
                           {450, "task_start", "ok", "task=1 gen=1 from=6 restored=0"},
                           {550, "task_start", "ok", "task=1 gen=1 from=8 restored=0"}});
  ExpectOnly("checkpoint_lost",
             "task 1 generation 1 restored at element 0 (reader at 8), but a checkpoint at 4 was "
             "acknowledged before");
}

TEST_F(HistoryCheckerTest, CheckpointGarbageCollectedNeedNotRestore) {
  // GarbageCollect may delete 2 (4 <= the acknowledged 5 is kept); the reader resumes at 3,
  // before 4 (it saved its position before acknowledging): restoring from 0 is allowed.
  Write("worker-0.0.tsv", {{180, "task_start", "ok", "task=1 gen=1 from=0 restored=0"},
                           {200, "checkpoint", "ok", "task=1 gen=1 index=2"},
                           {210, "checkpoint", "ok", "task=1 gen=1 index=4"},
                           {215, "checkpoint_gc", "invoke", "task=1 acknowledged=5"},
                           {220, "checkpoint", "ok", "task=1 gen=1 index=6"}});
  Write("worker-1.0.tsv", {{450, "task_start", "ok", "task=1 gen=2 from=3 restored=0"}});
  EXPECT_THAT(Check(), IsEmpty()) << Messages(Check());
}

TEST_F(HistoryCheckerTest, CheckpointPrunedNeedNotRestore) {
  // Write keeps the newest 3: 2 may be gone once 6, 7 and 8 are written.
  Write("worker-0.0.tsv", {{180, "task_start", "ok", "task=1 gen=1 from=0 restored=0"},
                           {200, "checkpoint", "ok", "task=1 gen=1 index=2"},
                           {220, "checkpoint", "ok", "task=1 gen=1 index=6"},
                           {230, "checkpoint", "ok", "task=1 gen=1 index=7"},
                           {240, "checkpoint", "ok", "task=1 gen=1 index=8"}});
  Write("worker-1.0.tsv", {{450, "task_start", "ok", "task=1 gen=2 from=5 restored=0"}});
  EXPECT_THAT(Check(), IsEmpty()) << Messages(Check());
}

TEST_F(HistoryCheckerTest, CheckpointsOfAFinishedTaskMayBeDeleted) {
  Write("worker-0.0.tsv", {{180, "task_start", "ok", "task=1 gen=1 from=0 restored=0"},
                           {200, "checkpoint", "ok", "task=1 gen=1 index=2"},
                           {220, "checkpoint_delete_all", "invoke", "task=1"}});
  Write("worker-1.0.tsv", {{450, "task_start", "ok", "task=1 gen=2 from=5 restored=0"}});
  EXPECT_THAT(Check(), IsEmpty()) << Messages(Check());
}

TEST_F(HistoryCheckerTest, CheckpointRestoredPastTheReaderIsFound) {
  Write("worker-0.0.tsv", {{180, "task_start", "ok", "task=1 gen=1 from=0 restored=0"},
                           {200, "checkpoint", "ok", "task=1 gen=1 index=8"}});
  Write("worker-0.1.tsv", {{450, "task_start", "ok", "task=1 gen=1 from=6 restored=8"}});
  ExpectOnly("checkpoint_lost", "task 1 restored at element 8 past its reader's index 6");
}

TEST_F(HistoryCheckerTest, SplitLeasedToTwoTasksIsFound) {
  WriteDispatcher();
  Write("dispatcher.1.tsv",
        {{400, "lease", "ok", "job=1 epoch=0 consumer=0 task=2 gen=2 worker=worker-1 splits=11"}});
  ExpectOnly("lease_exclusive", "job 1 epoch 0 split 11 leased to task 2 and to task 1");
}

TEST_F(HistoryCheckerTest, GenerationAssignedToTwoWorkersIsFound) {
  WriteDispatcher();
  Write("dispatcher.1.tsv",
        {{400, "assign", "ok", "job=1 epoch=0 consumer=0 task=1 gen=1 worker=worker-1"}});
  ExpectOnly("lease_exclusive", "task 1 generation 1 assigned to worker-1 and to worker-0");
}

TEST_F(HistoryCheckerTest, GenerationStartedByAnotherWorkerIsFound) {
  WriteDispatcher();
  Write("worker-0.0.tsv", {{180, "task_start", "ok", "task=1 gen=1 from=0 restored=0"}});
  Write("worker-1.0.tsv", {{190, "task_start", "ok", "task=1 gen=1 from=0 restored=0"}});
  const std::vector<HistoryViolation> violations = Check();
  ASSERT_EQ(violations.size(), 2u) << Messages(violations);
  EXPECT_THAT(violations[0].message,
              HasSubstr("task 1 generation 1 started by worker-1 and by worker-0"));
  EXPECT_THAT(violations[1].message,
              HasSubstr("task 1 generation 1 started by worker-1, but assigned to worker-0"));
}

TEST_F(HistoryCheckerTest, ElementProducedDifferentlyAfterARestoreIsFound) {
  Write("worker-0.0.tsv", {{180, "produce", "ok", "task=1 gen=1 index=4 checksum=44"},
                           {190, "produce", "ok", "task=1 gen=1 index=5 checksum=55"}});
  // Restored, it skips element 4: its element 5 takes index 4 (shared memory: not compared).
  Write("worker-0.1.tsv", {{300, "produce", "ok", "task=1 gen=1 index=4 checksum=55"},
                           {310, "produce", "ok", "task=1 gen=1 index=5 checksum=none"}});
  ExpectOnly("same_element",
             "task 1 element 4 produced by worker-0.1.tsv (generation 1) with checksum 55, but "
             "by worker-0.0.tsv seq 1 (generation 1) with 44");
}

TEST_F(HistoryCheckerTest, SeqGapAndTimeGoingBackAreFound) {
  Write("worker-0.0.tsv", {},
        "100\t1\tworker-0\ttask_start\tok\ttask=1 gen=1 from=0 restored=0\n"
        "90\t3\tworker-0\tcheckpoint\tok\ttask=1 gen=1 index=0\n");
  const std::vector<HistoryViolation> violations = Check();
  ASSERT_EQ(violations.size(), 2u) << Messages(violations);
  EXPECT_EQ(violations[0].rule, "file_order");
  EXPECT_THAT(violations[0].message, HasSubstr("worker-0.0.tsv line 2 has seq 3, not 2"));
  EXPECT_THAT(violations[1].message, HasSubstr("worker-0.0.tsv line 2 goes back in time"));
}

TEST_F(HistoryCheckerTest, UnparsableLineIsFoundAndTornLastLineIgnored) {
  Write("worker-0.0.tsv", {}, "100\t1\tworker-0\ttask_start ok\n100\t2\tworker-0\ttask_st");
  ExpectOnly("file_order", "worker-0.0.tsv line 1 does not parse");
}

TEST_F(HistoryCheckerTest, LineMissingAFieldItsRuleNeedsIsFound) {
  Write("client.0.tsv", {{210, "deliver", "ok", "job=1 epoch=0 consumer=0 task=1"}});
  ExpectOnly("file_order", "deliver without an integer index");
}

TEST_F(HistoryCheckerTest, DescribeViolationShowsTheLinesAroundIt) {
  const std::string epoch = "job=1 epoch=0 consumer=0";
  Write("client.0.tsv", {{210, "deliver", "ok", epoch + " task=1 index=0 gen=1"},
                         {220, "deliver", "ok", epoch + " task=1 index=0 gen=2"},
                         {230, "task_done", "info", epoch + " task=1 elements=1"}});
  absl::StatusOr<History> history = ReadHistory(dir_.path());
  ASSERT_TRUE(history.ok()) << history.status();
  const std::vector<HistoryViolation> violations = CheckHistoryEvents(*history);
  ASSERT_EQ(violations.size(), 1u);
  const std::string text = DescribeViolation(*history, violations[0], 1);
  EXPECT_THAT(text, HasSubstr("exactly_once: job 1 epoch 0 consumer 0: task 1 element 0 "
                              "delivered twice"));
  EXPECT_THAT(text, HasSubstr("\n     210\t1\tclient\tdeliver\tok\t"));
  EXPECT_THAT(text, HasSubstr("\n  >> 220\t2\tclient\tdeliver\tok\t"));
  EXPECT_THAT(text, HasSubstr("\n     230\t3\tclient\ttask_done\tinfo\t"));
}

TEST_F(HistoryCheckerTest, MissingDirectoryIsAnErrorNamingIt) {
  const absl::StatusOr<std::vector<HistoryViolation>> violations =
      CheckHistory(dir_.Join("absent"));
  ASSERT_FALSE(violations.ok());
  EXPECT_THAT(std::string(violations.status().message()), HasSubstr("absent"));
}

// The history log itself: lines in the format the checker reads, seq from 1, times that never
// go back, in a file appended to by a second log (a process's next start with the same name).
TEST_F(HistoryCheckerTest, HistoryLogWritesWhatTheCheckerReads) {
  {
    absl::StatusOr<std::unique_ptr<HistoryLog>> log =
        HistoryLog::Open(dir_.Join("client.0.tsv"), "client");
    ASSERT_TRUE(log.ok()) << log.status();
    (*log)->Record("read_epoch", "info", "job=1 epoch=0 consumer=0 restored=");
    (*log)->Record("deliver", "ok", "job=1 epoch=0 consumer=0 task=1 index=0 gen=1");
    (*log)->Record("task_done", "info", "job=1 epoch=0 consumer=0 task=1 elements=1");
  }
  absl::StatusOr<History> history = ReadHistory(dir_.path());
  ASSERT_TRUE(history.ok()) << history.status();
  ASSERT_EQ(history->events.size(), 3u);
  EXPECT_EQ(history->events[1].process, "client");
  EXPECT_EQ(history->events[1].op, "deliver");
  EXPECT_EQ(history->events[1].seq, 2);
  EXPECT_EQ(history->events[1].fields.at("index"), "0");
  EXPECT_LE(history->events[0].mono_ns, history->events[2].mono_ns);
  EXPECT_THAT(CheckHistoryEvents(*history), IsEmpty());
}

TEST_F(HistoryCheckerTest, HistoryLogOpenErrorNamesThePath) {
  absl::StatusOr<std::unique_ptr<HistoryLog>> log =
      HistoryLog::Open(dir_.Join("absent/client.0.tsv"), "client");
  ASSERT_FALSE(log.ok());
  EXPECT_THAT(std::string(log.status().message()), HasSubstr("absent/client.0.tsv"));
}

}  // namespace
}  // namespace granary
