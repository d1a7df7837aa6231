#include "faultinject/history_checker.h"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "checkpoint/checkpoint_store.h"
#include "common/env.h"
#include "common/status_macros.h"

namespace granary {
namespace {

constexpr char kFileOrder[] = "file_order";
constexpr char kExactlyOnce[] = "exactly_once";
constexpr char kJournalLost[] = "journal_lost";
constexpr char kCheckpointLost[] = "checkpoint_lost";
constexpr char kLeaseExclusive[] = "lease_exclusive";
constexpr char kSameElement[] = "same_element";

// Parses one complete line of `file`; nullopt if it does not parse.
std::optional<HistoryEvent> ParseLine(absl::string_view line, const std::string& file) {
  const std::vector<absl::string_view> columns = absl::StrSplit(line, '\t');
  HistoryEvent event;
  if (columns.size() != 6 || !absl::SimpleAtoi(columns[0], &event.mono_ns) ||
      !absl::SimpleAtoi(columns[1], &event.seq) || columns[2].empty() || columns[3].empty() ||
      columns[4].empty()) {
    return std::nullopt;
  }
  event.process = std::string(columns[2]);
  event.op = std::string(columns[3]);
  event.phase = std::string(columns[4]);
  for (absl::string_view field : absl::StrSplit(columns[5], ' ', absl::SkipEmpty())) {
    const size_t equals = field.find('=');
    if (equals == absl::string_view::npos || equals == 0) return std::nullopt;
    event.fields[std::string(field.substr(0, equals))] = std::string(field.substr(equals + 1));
  }
  event.file = file;
  event.line = std::string(line);
  return event;
}

// Reads one file's events into `history`, noting file_order violations.
void ReadFileEvents(const std::string& file, absl::string_view text, History* history) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  // The text after the last newline is a torn line (or nothing): ignored.
  lines.pop_back();
  int64_t expected_seq = 1;
  int64_t last_ns = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string where = absl::StrCat(file, " line ", i + 1);
    std::optional<HistoryEvent> event = ParseLine(lines[i], file);
    if (!event.has_value()) {
      history->unreadable.push_back(
          {kFileOrder, absl::StrCat(where, " does not parse: \"", lines[i], "\"")});
      continue;
    }
    if (event->seq != expected_seq) {
      history->unreadable.push_back(
          {kFileOrder, absl::StrCat(where, " has seq ", event->seq, ", not ", expected_seq)});
    }
    if (event->mono_ns < last_ns) {
      history->unreadable.push_back({kFileOrder, absl::StrCat(where, " goes back in time: ",
                                                              event->mono_ns, " after ", last_ns)});
    }
    expected_seq = event->seq + 1;
    last_ns = event->mono_ns;
    history->events.push_back(*std::move(event));
  }
}

// An integer field of `event`; nullopt if absent or not an integer.
std::optional<int64_t> IntField(const HistoryEvent& event, const std::string& key) {
  auto it = event.fields.find(key);
  int64_t value;
  if (it == event.fields.end() || !absl::SimpleAtoi(it->second, &value)) return std::nullopt;
  return value;
}

std::string Field(const HistoryEvent& event, const std::string& key) {
  auto it = event.fields.find(key);
  return it == event.fields.end() ? "" : it->second;
}

// Collects violations; each names the event it shows at.
class Checker {
 public:
  explicit Checker(const History& history) : events_(history.events) {}

  std::vector<HistoryViolation> Run() {
    for (size_t i = 0; i < events_.size(); ++i) {
      const HistoryEvent& e = events_[i];
      if (!HasFields(i)) continue;
      if (e.op == "read_epoch") ReadEpoch(i);
      if (e.op == "deliver") Deliver(i);
      if (e.op == "task_done") TaskDone(i);
      if (e.op == "journal_commit" || e.op == "journal_replay") JournalRecord(i);
      if (e.op == "journal_recover") JournalRecover(i);
      if (e.op == "checkpoint" || e.op == "checkpoint_gc" || e.op == "checkpoint_delete_all") {
        checkpoint_events_[TaskOf(e)].push_back(i);
      }
      if (e.op == "checkpoint_unusable") unusable_checkpoints_.insert({e.file, TaskOf(e)});
      if (e.op == "task_start") TaskStart(i);
      if (e.op == "lease") Lease(i);
      if (e.op == "assign") Assign(i);
      if (e.op == "produce") Produce(i);
    }
    Finish();
    return std::move(violations_);
  }

 private:
  // (job, epoch, consumer)
  using EpochKey = std::tuple<std::string, std::string, std::string>;
  EpochKey EpochOf(const HistoryEvent& e) const {
    return {Field(e, "job"), Field(e, "epoch"), Field(e, "consumer")};
  }
  static std::string Describe(const EpochKey& key) {
    return absl::StrCat("job ", std::get<0>(key), " epoch ", std::get<1>(key), " consumer ",
                        std::get<2>(key));
  }
  std::string TaskOf(const HistoryEvent& e) const { return Field(e, "task"); }

  void Violation(const char* rule, size_t event, std::string message) {
    violations_.push_back({rule, std::move(message), static_cast<int64_t>(event)});
  }

  // The integer fields each op needs; a line without them is a file_order violation.
  bool HasFields(size_t i) {
    static const auto* const required = new std::map<std::string, std::vector<std::string>>{
        {"deliver", {"job", "epoch", "consumer", "task", "index"}},
        {"task_done", {"job", "epoch", "consumer", "task", "elements"}},
        {"read_epoch", {"job", "epoch", "consumer"}},
        {"journal_commit", {"seq", "crc"}},
        {"journal_replay", {"seq", "crc"}},
        {"checkpoint", {"task", "index"}},
        {"checkpoint_gc", {"task", "acknowledged"}},
        {"checkpoint_delete_all", {"task"}},
        {"checkpoint_unusable", {"task"}},
        {"task_start", {"task", "gen", "from", "restored"}},
        {"lease", {"job", "epoch", "task", "gen"}},
        {"assign", {"task", "gen"}},
        {"produce", {"task", "gen", "index"}},
    };
    const HistoryEvent& e = events_[i];
    if (e.op == "journal_recover" && e.phase == "ok" && !IntField(e, "last_seq").has_value()) {
      Violation(kFileOrder, i, "journal_recover ok without an integer last_seq");
      return false;
    }
    auto it = required->find(e.op);
    if (it == required->end()) return true;
    for (const std::string& key : it->second) {
      if (!IntField(e, key).has_value()) {
        Violation(kFileOrder, i, absl::StrCat(e.op, " without an integer ", key));
        return false;
      }
    }
    return true;
  }

  // exactly_once ---------------------------------------------------------------------------

  void ReadEpoch(size_t i) {
    const HistoryEvent& e = events_[i];
    const EpochKey key = EpochOf(e);
    std::map<std::string, int64_t> restored;
    for (absl::string_view entry : absl::StrSplit(Field(e, "restored"), ',', absl::SkipEmpty())) {
      std::pair<std::string, std::string> task_index = absl::StrSplit(entry, ':');
      int64_t index;
      if (!absl::SimpleAtoi(task_index.second, &index)) {
        Violation(kFileOrder, i, absl::StrCat("read_epoch restored entry \"", entry, "\""));
        return;
      }
      restored[task_index.first] = index;
    }
    // What earlier incarnations delivered past the restored position is rolled back (the
    // trainer resumes there too); what the position counts as delivered must have been.
    for (auto& [task, delivered] : accepted_[key]) {
      const int64_t next = restored.count(task) ? restored[task] : 0;
      delivered.erase(delivered.lower_bound(next), delivered.end());
    }
    for (const auto& [task, next] : restored) {
      const std::map<int64_t, size_t>& delivered = accepted_[key][task];
      for (int64_t index = 0; index < next; ++index) {
        if (delivered.count(index) == 0) {
          Violation(kExactlyOnce, i,
                    absl::StrCat(Describe(key), ": the resumed position counts task ", task,
                                 " element ", index, " as delivered, but it never was"));
          break;
        }
      }
    }
  }

  void Deliver(size_t i) {
    const HistoryEvent& e = events_[i];
    const EpochKey key = EpochOf(e);
    const std::string task = TaskOf(e);
    const int64_t index = *IntField(e, "index");
    auto [owner, inserted] = consumer_of_task_.emplace(task, std::get<2>(key));
    if (owner->second != std::get<2>(key)) {
      Violation(kExactlyOnce, i,
                absl::StrCat("task ", task, " delivered to consumer ", std::get<2>(key),
                             " and to consumer ", owner->second));
    }
    std::map<int64_t, size_t>& delivered = accepted_[key][task];
    auto [earlier, first] = delivered.emplace(index, i);
    if (!first) {
      Violation(kExactlyOnce, i,
                absl::StrCat(Describe(key), ": task ", task, " element ", index,
                             " delivered twice (first: ", events_[earlier->second].file, " seq ",
                             events_[earlier->second].seq, ")"));
    }
  }

  void TaskDone(size_t i) {
    const HistoryEvent& e = events_[i];
    const EpochKey key = EpochOf(e);
    const int64_t elements = *IntField(e, "elements");
    auto [it, inserted] = task_done_[key].emplace(TaskOf(e), std::make_pair(elements, i));
    if (it->second.first != elements) {
      Violation(kExactlyOnce, i,
                absl::StrCat(Describe(key), ": task ", TaskOf(e), " done with ", elements,
                             " elements, earlier with ", it->second.first));
    }
  }

  void Finish() {
    for (const auto& [key, tasks] : task_done_) {
      for (const auto& [task, done] : tasks) {
        const auto& [elements, event] = done;
        const std::map<int64_t, size_t>& delivered = accepted_[key][task];
        for (int64_t index = 0; index < elements; ++index) {
          if (delivered.count(index) == 0) {
            Violation(kExactlyOnce, event,
                      absl::StrCat(Describe(key), ": task ", task, " element ", index, " of ",
                                   elements, " never delivered"));
            break;
          }
        }
        if (!delivered.empty() && delivered.rbegin()->first >= elements) {
          Violation(
              kExactlyOnce, delivered.rbegin()->second,
              absl::StrCat(Describe(key), ": task ", task, " element ", delivered.rbegin()->first,
                           " delivered, but the task has ", elements, " elements"));
        }
      }
    }
  }

  // journal_lost ----------------------------------------------------------------------------

  void JournalRecord(size_t i) {
    const HistoryEvent& e = events_[i];
    const int64_t seq = *IntField(e, "seq");
    const std::string crc = Field(e, "crc");
    auto [it, first] = journal_crc_.emplace(seq, i);
    if (!first && Field(events_[it->second], "crc") != crc) {
      const HistoryEvent& earlier = events_[it->second];
      Violation(kJournalLost, i,
                absl::StrCat("journal record ", seq, ": ", e.op, " by ", e.file, " has CRC ", crc,
                             ", but ", earlier.op, " by ", earlier.file, " had CRC ",
                             Field(earlier, "crc"), " (an acknowledged record was replaced)"));
    }
    if (e.op == "journal_commit" && seq > max_committed_) {
      max_committed_ = seq;
      max_committed_event_ = i;
    }
  }

  void JournalRecover(size_t i) {
    const HistoryEvent& e = events_[i];
    if (e.phase == "invoke") {
      // Everything committed before the recovery began must be recovered.
      recover_began_[e.file] = {max_committed_, max_committed_event_};
      return;
    }
    if (e.phase != "ok") return;
    auto began = recover_began_.find(e.file);
    if (began == recover_began_.end()) return;
    const auto [committed, committed_event] = began->second;
    const int64_t last = *IntField(e, "last_seq");
    if (last < committed) {
      Violation(kJournalLost, i,
                absl::StrCat(e.file, " recovered the journal up to record ", last, ", but record ",
                             committed, " was committed (", events_[committed_event].file, " seq ",
                             events_[committed_event].seq, ") before the recovery began"));
    }
  }

  // checkpoint_lost -------------------------------------------------------------------------

  void TaskStart(size_t i) {
    const HistoryEvent& e = events_[i];
    const std::string task = TaskOf(e);
    const int64_t from = *IntField(e, "from");
    const int64_t restored = *IntField(e, "restored");
    if (restored > from) {
      Violation(kCheckpointLost, i,
                absl::StrCat("task ", task, " restored at element ", restored,
                             " past its reader's index ", from, " (elements in between are lost)"));
    }
    // The checkpoints acknowledged so far, and the GarbageCollect bounds.
    std::vector<int64_t> written;
    std::vector<std::pair<int64_t, std::vector<int64_t>>> collected;  // bound, written before
    for (size_t c : checkpoint_events_[task]) {
      if (events_[c].op == "checkpoint") {
        written.push_back(*IntField(events_[c], "index"));
      } else if (events_[c].op == "checkpoint_delete_all") {
        written.clear();
        collected.clear();
      } else {
        collected.emplace_back(*IntField(events_[c], "acknowledged"), written);
      }
    }
    static const int kKept = CheckpointOptions().keep;
    int64_t must_restore = 0;
    for (int64_t x : written) {
      if (x > from || x <= must_restore) continue;
      const int64_t newer =
          std::count_if(written.begin(), written.end(), [x](int64_t y) { return y > x; });
      if (newer >= kKept) continue;  // Write may have pruned it.
      bool collectable = false;
      for (const auto& [bound, before] : collected) {
        for (int64_t y : before) collectable = collectable || (y > x && y <= bound);
      }
      if (!collectable) must_restore = x;
    }
    // The worker found its checkpoints unreadable or one not restoring (its disk failing, not a
    // checkpoint lost: a corrupt one is skipped for an older one, unreported): a recompute.
    const bool excused = unusable_checkpoints_.erase({e.file, task}) > 0;
    if (restored < must_restore && !excused) {
      Violation(
          kCheckpointLost, i,
          absl::StrCat("task ", task, " generation ", Field(e, "gen"), " restored at element ",
                       restored, " (reader at ", from, "), but a checkpoint at ", must_restore,
                       " was acknowledged before and nothing may have deleted it"));
    }
    // The worker that starts a generation must be the one it is assigned to.
    const auto key = std::make_pair(task, Field(e, "gen"));
    auto [starter, first] = started_by_.emplace(key, e.process);
    if (starter->second != e.process) {
      Violation(kLeaseExclusive, i,
                absl::StrCat("task ", task, " generation ", key.second, " started by ", e.process,
                             " and by ", starter->second));
    }
    auto assigned = assigned_to_.find(key);
    if (assigned != assigned_to_.end() && assigned->second.first != e.process) {
      Violation(kLeaseExclusive, i,
                absl::StrCat("task ", task, " generation ", key.second, " started by ", e.process,
                             ", but assigned to ", assigned->second.first));
    }
  }

  // lease_exclusive -------------------------------------------------------------------------

  void Lease(size_t i) {
    const HistoryEvent& e = events_[i];
    for (absl::string_view split : absl::StrSplit(Field(e, "splits"), ',', absl::SkipEmpty())) {
      const auto key = std::make_tuple(Field(e, "job"), Field(e, "epoch"), std::string(split));
      auto [holder, first] = lease_holder_.emplace(key, std::make_pair(TaskOf(e), i));
      if (holder->second.first != TaskOf(e)) {
        Violation(
            kLeaseExclusive, i,
            absl::StrCat("job ", std::get<0>(key), " epoch ", std::get<1>(key), " split ", split,
                         " leased to task ", TaskOf(e), " and to task ", holder->second.first));
      }
    }
  }

  void Assign(size_t i) {
    const HistoryEvent& e = events_[i];
    const auto key = std::make_pair(TaskOf(e), Field(e, "gen"));
    auto [assigned, first] = assigned_to_.emplace(key, std::make_pair(Field(e, "worker"), i));
    if (assigned->second.first != Field(e, "worker")) {
      Violation(kLeaseExclusive, i,
                absl::StrCat("task ", key.first, " generation ", key.second, " assigned to ",
                             Field(e, "worker"), " and to ", assigned->second.first));
    }
  }

  // same_element ----------------------------------------------------------------------------

  void Produce(size_t i) {
    const HistoryEvent& e = events_[i];
    const std::string checksum = Field(e, "checksum");
    if (checksum == "none") return;  // Not hashed (shared memory): nothing to compare.
    const auto key = std::make_pair(TaskOf(e), *IntField(e, "index"));
    auto [first, inserted] = produced_.emplace(key, i);
    const HistoryEvent& earlier = events_[first->second];
    if (Field(earlier, "checksum") != checksum) {
      Violation(kSameElement, i,
                absl::StrCat("task ", key.first, " element ", key.second, " produced by ", e.file,
                             " (generation ", Field(e, "gen"), ") with checksum ", checksum,
                             ", but by ", earlier.file, " seq ", earlier.seq, " (generation ",
                             Field(earlier, "gen"), ") with ", Field(earlier, "checksum")));
    }
  }

  const std::vector<HistoryEvent>& events_;
  std::vector<HistoryViolation> violations_;
  // exactly_once: per epoch, per task, the delivered indices still counted (→ event).
  std::map<EpochKey, std::map<std::string, std::map<int64_t, size_t>>> accepted_;
  std::map<EpochKey, std::map<std::string, std::pair<int64_t, size_t>>> task_done_;
  std::map<std::string, std::string> consumer_of_task_;
  // journal_lost: seq → its first commit or replay; the largest commit so far; per file, what
  // had been committed when its recovery began.
  std::map<int64_t, size_t> journal_crc_;
  int64_t max_committed_ = 0;
  size_t max_committed_event_ = 0;
  std::map<std::string, std::pair<int64_t, size_t>> recover_began_;
  // checkpoint_lost: per task, its checkpoint and checkpoint_gc events so far; (file, task) of
  // the checkpoint_unusable events not yet followed by that task's start in that file.
  std::map<std::string, std::vector<size_t>> checkpoint_events_;
  std::set<std::pair<std::string, std::string>> unusable_checkpoints_;
  // lease_exclusive: (task, gen) → worker process that started it / worker assigned (+ event);
  // (job, epoch, split) → task (+ event).
  std::map<std::pair<std::string, std::string>, std::string> started_by_;
  std::map<std::pair<std::string, std::string>, std::pair<std::string, size_t>> assigned_to_;
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<std::string, size_t>>
      lease_holder_;
  // same_element: (task, index) → its first hashed produce event.
  std::map<std::pair<std::string, int64_t>, size_t> produced_;
};

}  // namespace

absl::StatusOr<History> ReadHistory(const std::string& dir) {
  Env* const env = Env::Default();
  ASSIGN_OR_RETURN(std::vector<std::string> names, env->GetChildren(dir));
  std::sort(names.begin(), names.end());
  History history;
  for (const std::string& name : names) {
    if (!absl::EndsWith(name, ".tsv")) continue;
    ASSIGN_OR_RETURN(const std::string text, ReadFileToString(env, dir + "/" + name));
    ReadFileEvents(name, text, &history);
  }
  std::stable_sort(history.events.begin(), history.events.end(),
                   [](const HistoryEvent& a, const HistoryEvent& b) {
                     return std::tie(a.mono_ns, a.file, a.seq) < std::tie(b.mono_ns, b.file, b.seq);
                   });
  return history;
}

std::vector<HistoryViolation> CheckHistoryEvents(const History& history) {
  std::vector<HistoryViolation> violations = history.unreadable;
  std::vector<HistoryViolation> found = Checker(history).Run();
  std::stable_sort(
      found.begin(), found.end(),
      [](const HistoryViolation& a, const HistoryViolation& b) { return a.event < b.event; });
  violations.insert(violations.end(), found.begin(), found.end());
  return violations;
}

absl::StatusOr<std::vector<HistoryViolation>> CheckHistory(const std::string& dir) {
  ASSIGN_OR_RETURN(const History history, ReadHistory(dir));
  return CheckHistoryEvents(history);
}

std::string DescribeViolation(const History& history, const HistoryViolation& violation,
                              int context) {
  std::string out = absl::StrCat(violation.rule, ": ", violation.message);
  if (violation.event < 0) return out;
  const int64_t first = std::max<int64_t>(0, violation.event - context);
  const int64_t last =
      std::min<int64_t>(static_cast<int64_t>(history.events.size()) - 1, violation.event + context);
  for (int64_t i = first; i <= last; ++i) {
    absl::StrAppend(&out, "\n  ", i == violation.event ? ">> " : "   ", history.events[i].line);
  }
  return out;
}

}  // namespace granary
