// The history checker of `granary chaos` (issue 33): reads the history files every process
// incarnation of a run wrote (common/history_log.h, format in common/FORMAT.md) and checks
// what the multiset digests cannot see — which element, which record, which checkpoint:
//   exactly_once      per (job, epoch, consumer), every element (task, index) a task_done
//                     counted was delivered exactly once, counting a restarted client's
//                     deliveries from the position it resumed at (read_epoch's restored
//                     indices: what an earlier incarnation delivered past them is rolled back,
//                     what they claim delivered must have been); no element delivered twice;
//                     every task read by one consumer only; task_done counts agree.
//   journal_lost      a recovery (journal_recover) that began after record N was committed
//                     recovers at least N records; every commit and replay of one seq carries
//                     the same CRC (no acknowledged record lost or replaced across a restart,
//                     in the RocksDB journal or across leaders of the etcd one).
//   checkpoint_lost   a task started at reader index `from` restores at most `from`, and at
//                     least the newest checkpoint acknowledged (checkpoint ok) at or before
//                     `from` that nothing may have deleted: neither Write's pruning (it keeps
//                     the newest CheckpointOptions::keep) nor GarbageCollect (it keeps the newest
//                     at or below the client's acknowledged index) nor the deletion of a finished
//                     task's checkpoints, as worker.proto promises — unless the worker said
//                     right before that start that its checkpoints were unusable
//                     (checkpoint_unusable: unreadable, or the newest did not restore, on a
//                     failing disk), which costs a recompute; a corrupt one it skips silently.
//   lease_exclusive   each split of a (job, epoch) leased to one task only; each generation of
//                     a task assigned to one worker, and started by that worker only.
//   same_element      a task's element at an index has one checksum whoever produces it, in
//                     whichever generation or incarnation (its stream does not depend on who
//                     computes it): a worker that skips or reorders elements after a restore
//                     shows here even when every index is delivered once.
//   file_order        in each file, seq counts 1, 2, 3… and time never goes back; every line
//                     parses. A last line without its newline (torn by a kill) is ignored.
#ifndef GRANARY_FAULTINJECT_HISTORY_CHECKER_H_
#define GRANARY_FAULTINJECT_HISTORY_CHECKER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace granary {

// One line of a history file.
struct HistoryEvent {
  int64_t mono_ns = 0;
  int64_t seq = 0;
  std::string process;
  std::string op;
  std::string phase;
  std::map<std::string, std::string> fields;
  std::string file;  // Its file's base name: the process incarnation ("worker-0.2.tsv").
  std::string line;  // As written, without the newline.
};

struct HistoryViolation {
  std::string rule;  // One of the rules above.
  std::string message;
  // Where it shows, as an index into the history's events (-1: in no event).
  int64_t event = -1;
};

struct History {
  // Every file's events, ordered by time (ties: file, then seq).
  std::vector<HistoryEvent> events;
  // file_order violations found while reading (their `event` is -1).
  std::vector<HistoryViolation> unreadable;
};

// Reads every *.tsv file of `dir`. Errors: the directory's or a file's read error, naming it.
absl::StatusOr<History> ReadHistory(const std::string& dir);

// The violations of `history`, ordered by the time of the event they show at.
std::vector<HistoryViolation> CheckHistoryEvents(const History& history);

// ReadHistory then CheckHistoryEvents.
absl::StatusOr<std::vector<HistoryViolation>> CheckHistory(const std::string& dir);

// A violation for a failure message: "rule: message", then the history's lines from `context`
// before its event to `context` after it, the event's marked ">>".
std::string DescribeViolation(const History& history, const HistoryViolation& violation,
                              int context);

}  // namespace granary

#endif  // GRANARY_FAULTINJECT_HISTORY_CHECKER_H_
