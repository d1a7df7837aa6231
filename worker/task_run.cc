#include "worker/task_run.h"

#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "common/hash.h"
#include "common/history_log.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "worker/leased_split_provider.h"

namespace granary {
namespace {

// The prefix of every state entry of a checkpoint taken by a run without the trainer-side tail:
// a reader expecting the other pipeline's entries (this code, or an older worker that knows
// nothing of the tail) finds none of its keys, and recomputes.
constexpr char kTrainerTailStatePrefix[] = "trainer_tail/";

// `state` with every entry's key prefixed.
IteratorStateProto Prefixed(const IteratorStateProto& state) {
  IteratorStateProto out;
  for (const auto& [key, value] : state.entries()) {
    (*out.mutable_entries())[kTrainerTailStatePrefix + key] = value;
  }
  return out;
}

// `state` without the prefix, if every key has it; nullopt if any does not.
std::optional<IteratorStateProto> Unprefixed(const IteratorStateProto& state) {
  IteratorStateProto out;
  for (const auto& [key, value] : state.entries()) {
    if (!absl::StartsWith(key, kTrainerTailStatePrefix)) return std::nullopt;
    (*out.mutable_entries())[key.substr(sizeof(kTrainerTailStatePrefix) - 1)] = value;
  }
  return out;
}

// Whether any key of `state` has the prefix.
bool AnyPrefixed(const IteratorStateProto& state) {
  for (const auto& [key, value] : state.entries()) {
    if (absl::StartsWith(key, kTrainerTailStatePrefix)) return true;
  }
  return false;
}

}  // namespace

TaskRun::TaskRun(const TaskRunSpec& spec, Callbacks callbacks)
    : spec_(spec), callbacks_(std::move(callbacks)) {}

TaskRun::~TaskRun() {
  // The last checkpoint write (and chunk commit) is over before the run is gone and before
  // another run of the task can start.
  JoinWriter();
}

absl::StatusOr<std::unique_ptr<TaskRun>> TaskRun::Make(const TaskRunSpec& spec, int64_t from,
                                                       Callbacks callbacks) {
  std::unique_ptr<TaskRun> run(new TaskRun(spec, std::move(callbacks)));
  RETURN_IF_ERROR(run->Build());
  if (!run->Restore(from)) {  // A checkpoint that would not restore: start over from index 0.
    RETURN_IF_ERROR(run->Build());
    run->restored_index_ = 0;
  }
  return run;
}

absl::Status TaskRun::Build() {
  it_.reset();  // Before the hooks whose sink it uses.
  hooks_ = spec_.hooks ? spec_.hooks() : std::make_unique<RunHooks>();
  IteratorContext ctx{spec_.env, spec_.def.seed(), spec_.def.epoch()};
  ctx.cached_prefix_ops = spec_.def.cached_prefix_ops();
  hooks_->LendResources(&ctx.resources);
  ctx.pool = spec_.pool;
  ASSIGN_OR_RETURN(
      it_, spec_.pipeline->MakeIterator(ctx, std::make_unique<LeasedSplitProvider>(
                                                 spec_.dispatcher, spec_.env, spec_.def.task_id(),
                                                 spec_.lease_size, callbacks_.cancelled)));
  return absl::OkStatus();
}

bool TaskRun::Restore(int64_t from) {
  if (spec_.checkpoints == nullptr || from == 0) return true;
  const int64_t task = spec_.def.task_id();
  std::vector<std::string> skipped;
  absl::StatusOr<Checkpoint> checkpoint = spec_.checkpoints->Newest(task, from, &skipped);
  for (const std::string& path : skipped) {
    LOG(WARNING) << "task " << task << ": skipped unreadable checkpoint " << path;
  }
  if (!checkpoint.ok()) {
    // None at or before `from` (NotFound), or the store could not be read (a failing disk): the
    // run starts from index 0 — a recompute.
    if (!absl::IsNotFound(checkpoint.status())) {
      LOG(WARNING) << "task " << task << ": cannot read its checkpoints (" << checkpoint.status()
                   << "); recomputing from index 0";
      GRANARY_HISTORY_RECORD("checkpoint_unusable", "info", "task=", task,
                             " code=", absl::StatusCodeToString(checkpoint.status().code()));
    }
    return true;
  }
  IteratorStateProto state;
  absl::Status status = state.ParseFromString(checkpoint->state)
                            ? absl::OkStatus()
                            : absl::DataLossError("iterator state does not parse");
  // The state of the pipeline with its trainer-side tail does not restore the one without it,
  // nor the other way round (the elements it holds are not the same).
  if (status.ok() && spec_.trainer_tail) {
    std::optional<IteratorStateProto> own = Unprefixed(state);
    if (own.has_value()) {
      state = *std::move(own);
    } else {
      status = absl::FailedPreconditionError(
          "taken by a run that kept the trainer-side tail on the worker");
    }
  } else if (status.ok() && AnyPrefixed(state)) {
    status = absl::FailedPreconditionError(
        "taken by a run that left the trainer-side tail to its reader");
  }
  if (status.ok()) status = it_->Restore(StateReader(&state));
  if (!status.ok()) {
    LOG(WARNING) << "task " << task << ": checkpoint " << checkpoint->path << " does not restore ("
                 << status << "); recomputing from index 0";
    GRANARY_HISTORY_RECORD("checkpoint_unusable", "info", "task=", task,
                           " index=", checkpoint->index,
                           " code=", absl::StatusCodeToString(status.code()));
    return false;
  }
  LOG(INFO) << "task " << task << ": restored from checkpoint " << checkpoint->path
            << " at element " << checkpoint->index << " (client at " << from << ")";
  restored_index_ = checkpoint->index;
  return true;
}

absl::Status TaskRun::Next(ReplyElement* element, bool* end) {
  Element e;
  RETURN_IF_ERROR(it_->GetNext(&e, end));
  if (*end) return absl::OkStatus();
  // A batch is its image already; anything else is written into one here, once.
  ASSIGN_OR_RETURN(element->image, e.Serialize(spec_.pool));
  // An image in shared memory is hashed only if it is ever sent over TCP (WorkerImpl).
  if (element->image->segment_fd() < 0) {
    element->checksum = Hash3_64(element->image->bytes());
    element->hashed = true;
  }
  return absl::OkStatus();
}

int64_t TaskRun::TakeCheckpoint(int64_t index) {
  const int64_t task = spec_.def.task_id();
  const uint64_t start = spec_.env->NowMicros();
  IteratorStateProto state;
  StateWriter writer(&state);
  const absl::Status saved = it_->Save(writer);
  std::string bytes = !saved.ok()          ? std::string()
                      : spec_.trainer_tail ? Prefixed(state).SerializeAsString()
                                           : state.SerializeAsString();
  // What the hooks must make durable before this checkpoint (the cache chunks its Save sealed).
  const int64_t token = hooks_->Saved();
  const int64_t stall_us = static_cast<int64_t>(spec_.env->NowMicros() - start);
  if (!saved.ok()) {
    LOG(WARNING) << "task " << task << ": checkpoint at " << index << " not taken: " << saved;
    return stall_us;
  }
  JoinWriter();  // One write in flight at a time (the previous one is normally long done).
  writer_ = std::thread([this, index, token, task, bytes = std::move(bytes)] {
    const absl::Status before = hooks_->BeforeCheckpointWrite(token);
    const absl::StatusOr<int64_t> written =
        before.ok() ? spec_.checkpoints->Write(task, spec_.def.generation(), index, bytes,
                                               callbacks_.acknowledged())
                    : absl::StatusOr<int64_t>(before);
    if (!written.ok()) {
      LOG(WARNING) << "task " << task << ": checkpoint at " << index << ": " << written.status();
      return;
    }
    callbacks_.on_written({index, *written});
    const absl::Status after = hooks_->AfterCheckpointWrite(token);
    if (!after.ok()) {
      // The next checkpoint, a restore or the run's end does it again.
      LOG(WARNING) << "task " << task << ": after checkpoint at " << index << ": " << after;
    }
    const int64_t acknowledged = callbacks_.acknowledged();
    GRANARY_HISTORY_RECORD("checkpoint_gc", "invoke", "task=", task,
                           " acknowledged=", acknowledged);
    const absl::Status gc = spec_.checkpoints->GarbageCollect(task, acknowledged);
    if (!gc.ok()) LOG(WARNING) << "task " << task << ": checkpoint cleanup: " << gc;
  });
  return stall_us;
}

absl::StatusOr<std::vector<CacheChunk>> TaskRun::Finish() {
  JoinWriter();  // Finish must not race a checkpoint's commit.
  return hooks_->Finish();
}

void TaskRun::JoinWriter() {
  if (writer_.joinable()) writer_.join();
}

}  // namespace granary
