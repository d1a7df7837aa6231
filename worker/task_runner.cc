#include "worker/task_runner.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "worker/leased_split_provider.h"

namespace granary {

TaskRunner::TaskRunner(const TaskDef& def, std::shared_ptr<const Pipeline> pipeline,
                       DispatcherConnection* dispatcher, const TaskRunnerOptions& options,
                       OnFinished on_finished)
    : def_(def),
      pipeline_(std::move(pipeline)),
      dispatcher_(dispatcher),
      options_(options),
      on_finished_(std::move(on_finished)) {}

TaskRunner::~TaskRunner() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  StopProducer();
}

void TaskRunner::StartProducer() {
  const int64_t run = ++run_;
  producer_ = std::thread([this, run] { Produce(run); });
}

void TaskRunner::StopProducer() {
  if (producer_.joinable()) producer_.join();
}

absl::StatusOr<TaskRunner::Run> TaskRunner::MakeRun(std::function<bool()> cancelled) const {
  Run run;
  IteratorContext ctx{options_.env, def_.seed(), def_.epoch()};
  ctx.cached_prefix_ops = def_.cached_prefix_ops();
  if (!def_.cache_dir().empty()) {
    CachePutOptions cache;
    cache.env = options_.env;
    cache.dir = def_.cache_dir();
    cache.task_id = def_.task_id();
    cache.generation = def_.generation();
    run.cache = std::make_unique<CachePut>(cache);
    ctx.cache_sink = run.cache.get();
  }
  ASSIGN_OR_RETURN(run.it,
                   pipeline_->MakeIterator(ctx, std::make_unique<LeasedSplitProvider>(
                                                    dispatcher_, options_.env, def_.task_id(),
                                                    options_.lease_size, std::move(cancelled))));
  return run;
}

void TaskRunner::Produce(int64_t run_id) {
  const auto current = [this, run_id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return run_ == run_id && !stopping_;
  };
  const auto cancelled = [this, current] {
    absl::MutexLock lock(&mu_);
    return !current();
  };
  absl::StatusOr<Run> run = MakeRun(cancelled);
  // Whatever way this run ends, its last checkpoint write (and chunk commit) is over before the
  // run is destroyed and before another run of the task can start (StopProducer joins this
  // thread).
  struct JoinWriterOnExit {
    TaskRunner* runner;
    ~JoinWriterOnExit() { runner->JoinCheckpointWriter(); }
  } join_writer_on_exit{this};
  if (run.ok()) {
    int64_t restored = RestoreFromCheckpoint(*run);
    if (restored < 0) {  // A checkpoint that would not restore: start over from index 0.
      run = MakeRun(cancelled);
      restored = 0;
    }
    absl::MutexLock lock(&mu_);
    if (!current()) return;
    produced_ = restored;
  }
  bool testonly_skip_pending;
  {
    absl::MutexLock lock(&mu_);
    testonly_skip_pending = options_.testonly_skip_element_after_restore && discard_below_ > 0;
  }
  // On the Env's clock, so tests can move it.
  uint64_t last_checkpoint = options_.env->NowMicros();
  while (run.ok()) {
    {
      absl::MutexLock lock(&mu_);
      const auto may_produce = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !current() || window_.empty() || buffered_bytes_ < options_.window_bytes ||
               produced_ < discard_below_;
      };
      mu_.Await(absl::Condition(&may_produce));
      if (!current()) return;
    }
    Element element;
    bool end = false;
    absl::Status status = run->it->GetNext(&element, &end);
    IndexedElement indexed;
    if (status.ok() && !end) {
      absl::StatusOr<BufferRef> image = element.Serialize();
      if (image.ok()) {
        indexed.set_payload(std::string((*image)->bytes()));
        indexed.set_checksum(Hash64(indexed.payload()));
      } else {
        status = image.status();
      }
    }
    int64_t finished_count = -1;
    {
      absl::MutexLock lock(&mu_);
      if (!current()) return;
      if (!status.ok()) {
        error_ = Annotate(status, absl::StrCat("task ", def_.task_id(), " element ", produced_));
        LOG(ERROR) << error_;
        return;
      }
      if (end) {
        ended_ = true;
        if (!finish_reported_) {
          finish_reported_ = true;
          finished_count = produced_;
        }
      } else if (produced_ < discard_below_) {
        ++recomputed_;
        ++produced_;
      } else if (testonly_skip_pending) {
        testonly_skip_pending = false;  // The deliberate bug: this element is never served.
      } else {
        indexed.set_index(produced_++);
        buffered_bytes_ += indexed.payload().size();
        window_.push_back(std::move(indexed));
      }
    }
    if (end) {
      if (finished_count >= 0) Finish(*run, finished_count);
      return;
    }
    if (options_.checkpoints != nullptr &&
        options_.env->NowMicros() - last_checkpoint >=
            static_cast<uint64_t>(options_.checkpoint_interval_ms) * 1000) {
      int64_t index;
      {
        absl::MutexLock lock(&mu_);
        index = produced_;
      }
      TakeCheckpoint(*run, index);
      last_checkpoint = options_.env->NowMicros();
    }
  }
  absl::MutexLock lock(&mu_);
  if (current()) error_ = Annotate(run.status(), absl::StrCat("task ", def_.task_id()));
}

void TaskRunner::Finish(Run& run, int64_t num_elements) {
  std::vector<CacheChunk> chunks;
  if (run.cache != nullptr) {
    JoinCheckpointWriter();  // Finish must not race a commit.
    absl::StatusOr<std::vector<CacheChunk>> committed = run.cache->Finish();
    if (!committed.ok()) {
      // Not reported finished: the cache's manifest would miss this task's elements.
      absl::MutexLock lock(&mu_);
      error_ = Annotate(committed.status(),
                        absl::StrCat("task ", def_.task_id(), ": committing its cache chunks"));
      LOG(ERROR) << error_;
      return;
    }
    chunks = std::move(committed).value();
  }
  on_finished_(num_elements, chunks);
}

int64_t TaskRunner::RestoreFromCheckpoint(Run& run) {
  if (options_.checkpoints == nullptr) return 0;
  int64_t from;
  {
    absl::MutexLock lock(&mu_);
    from = discard_below_;
  }
  if (from == 0) return 0;
  std::vector<std::string> skipped;
  absl::StatusOr<Checkpoint> checkpoint =
      options_.checkpoints->Newest(def_.task_id(), from, &skipped);
  for (const std::string& path : skipped) {
    LOG(WARNING) << "task " << def_.task_id() << ": skipped unreadable checkpoint " << path;
  }
  if (!checkpoint.ok()) return 0;
  IteratorStateProto state;
  absl::Status status = state.ParseFromString(checkpoint->state)
                            ? run.it->Restore(StateReader(&state))
                            : absl::DataLossError("iterator state does not parse");
  if (!status.ok()) {
    // The iterator may be half restored: the caller must not use it. Report and start over.
    LOG(WARNING) << "task " << def_.task_id() << ": checkpoint " << checkpoint->path
                 << " does not restore (" << status << "); recomputing from index 0";
    return -1;
  }
  LOG(INFO) << "task " << def_.task_id() << ": restored from checkpoint " << checkpoint->path
            << " at element " << checkpoint->index << " (client at " << from << ")";
  absl::MutexLock lock(&mu_);
  restored_from_ = checkpoint->index;
  return checkpoint->index;
}

void TaskRunner::TakeCheckpoint(Run& run, int64_t index) {
  const uint64_t start = options_.env->NowMicros();
  IteratorStateProto state;
  StateWriter writer(&state);
  const absl::Status saved = run.it->Save(writer);
  std::string bytes = saved.ok() ? state.SerializeAsString() : std::string();
  // The chunks this checkpoint covers: those its Save sealed and the ones before.
  const int64_t sealed = run.cache != nullptr ? run.cache->sealed() : 0;
  const int64_t stall_us = static_cast<int64_t>(options_.env->NowMicros() - start);
  {
    absl::MutexLock lock(&mu_);
    checkpoint_stall_us_ += stall_us;
  }
  if (!saved.ok()) {
    LOG(WARNING) << "task " << def_.task_id() << ": checkpoint at " << index << " not taken: "
                 << saved;
    return;
  }
  // One write in flight at a time: wait for the previous one (normally long done).
  JoinCheckpointWriter();
  checkpoint_writer_ = std::thread([this, index, sealed, cache = run.cache.get(),
                                    bytes = std::move(bytes)] {
    // Chunks first made durable, then the checkpoint naming them, then their commit
    // (checkpoint/cache_put.h).
    const absl::Status synced = cache != nullptr ? cache->SyncSealed(sealed) : absl::OkStatus();
    const absl::StatusOr<int64_t> written =
        synced.ok()
            ? options_.checkpoints->Write(def_.task_id(), def_.generation(), index, bytes)
            : absl::StatusOr<int64_t>(synced);
    int64_t acknowledged;
    {
      absl::MutexLock lock(&mu_);
      if (written.ok()) {
        ++checkpoints_written_;
        checkpoint_bytes_ += *written;
        last_checkpoint_index_ = index;
      }
      acknowledged = acknowledged_;
    }
    if (!written.ok()) {
      LOG(WARNING) << "task " << def_.task_id() << ": checkpoint at " << index << ": "
                   << written.status();
      return;
    }
    if (cache != nullptr) {
      const absl::Status committed = cache->CommitSealed(sealed);
      if (!committed.ok()) {
        // The next checkpoint, a restore or the task's end commits them.
        LOG(WARNING) << "task " << def_.task_id() << ": committing cache chunks: " << committed;
      }
    }
    const absl::Status gc = options_.checkpoints->GarbageCollect(def_.task_id(), acknowledged);
    if (!gc.ok()) LOG(WARNING) << "task " << def_.task_id() << ": checkpoint cleanup: " << gc;
  });
}

void TaskRunner::JoinCheckpointWriter() {
  if (checkpoint_writer_.joinable()) checkpoint_writer_.join();
}

void TaskRunner::Acknowledge(int64_t index) {
  acknowledged_ = std::max(acknowledged_, index);
  while (!window_.empty() && window_.front().index() < index) {
    buffered_bytes_ -= window_.front().payload().size();
    window_.pop_front();
  }
}

absl::Status TaskRunner::GetElements(const GetElementsRequest& request,
                                     GetElementsResponse* response) {
  const int64_t from = request.from_index();
  if (from < 0) return absl::InvalidArgumentError("from_index must not be negative");
  // One request at a time per task: a restart below must not race another.
  absl::MutexLock request_lock(&request_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (run_ == 0) StartProducer();
    const int64_t window_start = window_.empty() ? produced_ : window_.front().index();
    if (from < window_start) {
      // The client resumes from before what we still hold: recompute the task from its start.
      LOG(INFO) << "task " << def_.task_id() << ": request for element " << from
                << " below the window (" << window_start << "): restarting the task";
      ++run_;  // The running producer exits at its next check.
      mu_.Unlock();
      StopProducer();
      mu_.Lock();
      window_.clear();
      buffered_bytes_ = 0;
      produced_ = 0;
      ended_ = false;
      error_ = absl::OkStatus();
      discard_below_ = from;
      // The client acknowledges the recomputed run afresh: until it reads that run to its end
      // the runner is not fully acknowledged (the worker would drop it under the reader) and
      // checkpoints at or after `from` are not garbage.
      acknowledged_ = 0;
      StartProducer();
    }
    Acknowledge(from);
    discard_below_ = std::max(discard_below_, from);
  }
  absl::MutexLock lock(&mu_);
  const auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !error_.ok() || (ended_ && from >= produced_) ||
           (!window_.empty() && window_.front().index() == from);
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(options_.poll_timeout_ms));
  RETURN_IF_ERROR(error_);
  response->set_recomputed(recomputed_ - recomputed_reported_);
  recomputed_reported_ = recomputed_;
  if (ended_ && from >= produced_) {
    if (from > produced_) {
      return absl::OutOfRangeError(absl::StrCat("task ", def_.task_id(), " has only ", produced_,
                                                " elements; from_index ", from, " is past its end"));
    }
    response->set_end_of_task(true);
    response->set_num_elements(produced_);
    return absl::OkStatus();
  }
  int64_t bytes = 0;
  for (const IndexedElement& e : window_) {
    if (response->elements_size() > 0 && bytes + static_cast<int64_t>(e.payload().size()) >
                                              std::max<int64_t>(request.max_bytes(), 1)) {
      break;
    }
    bytes += e.payload().size();
    *response->add_elements() = e;
  }
  return absl::OkStatus();
}

TaskStatus TaskRunner::Status() const {
  absl::MutexLock lock(&mu_);
  TaskStatus status;
  status.set_task_id(def_.task_id());
  status.set_generation(def_.generation());
  status.set_produced(produced_);
  status.set_window_start(window_.empty() ? produced_ : window_.front().index());
  status.set_buffered_bytes(buffered_bytes_);
  status.set_window_bytes(options_.window_bytes);
  status.set_finished(ended_);
  status.set_recomputed(recomputed_);
  status.set_restored_from(restored_from_);
  status.set_checkpoints_written(checkpoints_written_);
  status.set_checkpoint_bytes(checkpoint_bytes_);
  status.set_last_checkpoint_index(last_checkpoint_index_);
  status.set_checkpoint_stall_us(checkpoint_stall_us_);
  return status;
}

bool TaskRunner::FullyAcknowledged() const {
  absl::MutexLock lock(&mu_);
  return ended_ && acknowledged_ >= produced_;
}

}  // namespace granary
