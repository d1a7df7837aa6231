#include "worker/task_runner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/failpoints.h"
#include "common/history_log.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "obs/structured_log.h"

namespace granary {

TaskRunner::TaskRunner(const TaskDef& def, std::shared_ptr<const Pipeline> pipeline,
                       DispatcherConnection* dispatcher, const TaskRunnerOptions& options,
                       OnFinished on_finished, RunHooksFactory hooks,
                       std::optional<TrainerTailOffer> tail)
    : confined_env_(options.data_roots.has_value()
                        ? std::make_unique<ConfinedEnv>(options.env,
                                                        options.data_roots->With(def.cache_root()))
                        : nullptr),
      spec_{def,
            pipeline.get(),
            dispatcher,
            confined_env_ != nullptr ? confined_env_.get() : options.env,
            options.lease_size,
            options.checkpoints,
            std::move(hooks),
            options.pool},
      pipeline_(std::move(pipeline)),
      tail_offer_(std::move(tail)),
      options_(options),
      on_finished_(std::move(on_finished)),
      window_(options.window_bytes),
      metrics_(options.metrics != nullptr ? &options.metrics->ForJob(def.job_id()) : nullptr) {}

TaskRunner::~TaskRunner() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  StopProducer();
}

void TaskRunner::ChooseTail(const GetElementsRequest& first) {
  // An older reader does not run a tail: it would hand out the elements without it.
  if (!tail_offer_.has_value() || !first.runs_trainer_tail()) return;
  if (tail_offer_->when != TAIL_CLIENT && first.shm_session() != 0) return;
  absl::StatusOr<std::shared_ptr<const Pipeline>> without = tail_offer_->pipeline();
  if (!without.ok()) {
    LOG(WARNING) << "task " << def().task_id()
                 << ": running its trainer-side tail here: the pipeline without it does not build: "
                 << without.status();
    return;
  }
  pipeline_ = *std::move(without);
  spec_.pipeline = pipeline_.get();
  spec_.trainer_tail = true;
  trainer_tail_ = tail_offer_->tail.SerializeAsString();
}

void TaskRunner::StartProducer() {
  const int64_t run = ++run_;
  producer_ = std::thread([this, run] { Produce(run); });
}

void TaskRunner::StopProducer() {
  if (producer_.joinable()) producer_.join();
}

void TaskRunner::Produce(int64_t run_id) {
  const ScopedLogContext log_context(def().job_id(), def().task_id());
  TaskRun::Callbacks callbacks;
  callbacks.cancelled = [this, run_id] {
    absl::MutexLock lock(&mu_);
    return !IsCurrent(run_id);
  };
  callbacks.acknowledged = [this] {
    absl::MutexLock lock(&mu_);
    return acknowledged_;
  };
  callbacks.on_written = [this](const CheckpointWritten& written) {
    absl::MutexLock lock(&mu_);
    ++checkpoints_written_;
    checkpoint_bytes_ += written.bytes;
    if (metrics_ != nullptr) {
      metrics_->checkpoints->Increment();
      metrics_->checkpoint_bytes->Add(static_cast<double>(written.bytes));
    }
    last_checkpoint_index_ = written.index;
    GRANARY_HISTORY_RECORD("checkpoint", "ok", "task=", def().task_id(),
                           " gen=", def().generation(), " index=", written.index);
  };
  int64_t from;
  {
    absl::MutexLock lock(&mu_);
    from = discard_below_;
  }
  absl::StatusOr<std::unique_ptr<TaskRun>> run = TaskRun::Make(spec_, from, callbacks);
  {
    absl::MutexLock lock(&mu_);
    if (!IsCurrent(run_id)) return;
    if (!run.ok()) {
      error_ = Annotate(run.status(), absl::StrCat("task ", def().task_id()));
      return;
    }
    GRANARY_HISTORY_RECORD("task_start", "ok", "task=", def().task_id(),
                           " gen=", def().generation(), " from=", from,
                           " restored=", (*run)->restored_index());
    produced_ = (*run)->restored_index();
    if ((*run)->restored_index() > 0) restored_from_ = (*run)->restored_index();
    LOG(INFO) << "generation " << def().generation() << " runs from element "
              << (*run)->restored_index()
              << ((*run)->restored_index() > 0 ? " (restored from a checkpoint)" : "")
              << (from > (*run)->restored_index()
                      ? absl::StrCat(", recomputing up to ", from, " (its reader has those)")
                      : "");
    if (metrics_ != nullptr && from > 0) {
      ((*run)->restored_index() > 0 ? metrics_->restores_from_checkpoint
                                    : metrics_->restores_from_start)
          ->Increment();
    }
  }
  // The failpoint's error action is a deliberately broken worker (common/failpoints.h).
  bool drop_first_served = from > 0 && !HitFailpoint(kWorkerAfterResumeBeforeServe).ok();
  // On the Env's clock, so tests can move it.
  uint64_t last_checkpoint = options_.env->NowMicros();
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      const auto may_produce = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !IsCurrent(run_id) || window_.HasRoom() || produced_ < discard_below_;
      };
      mu_.Await(absl::Condition(&may_produce));
      if (!IsCurrent(run_id)) return;
    }
    ReplyElement element;
    bool end = false;
    const uint64_t busy_from = options_.env->NowMicros();
    const absl::Status status = (*run)->Next(&element, &end);
    const uint64_t busy_us = options_.env->NowMicros() - busy_from;
    int64_t finished_count = -1;
    {
      absl::MutexLock lock(&mu_);
      if (!IsCurrent(run_id)) return;
      busy_us_ += static_cast<int64_t>(busy_us);
      if (!end) ++made_;
      if (!status.ok()) {
        error_ = Annotate(status, absl::StrCat("task ", def().task_id(), " element ", produced_));
        LOG(ERROR) << error_;
        return;
      }
      if (!end) {
        GRANARY_HISTORY_RECORD("produce", "ok", "task=", def().task_id(),
                               " gen=", def().generation(), " index=", produced_, " checksum=",
                               element.hashed ? absl::StrCat(element.checksum) : "none");
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
        if (metrics_ != nullptr) metrics_->recomputed->Increment();
      } else if (drop_first_served) {
        // The deliberate bug: this element is never served, the next one takes its index.
        drop_first_served = false;
      } else {
        element.index = produced_++;
        window_.Append(std::move(element));
      }
    }
    if (end) {
      if (finished_count >= 0) Finish(**run, finished_count);
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
      const int64_t stall_us = (*run)->TakeCheckpoint(index);
      {
        absl::MutexLock lock(&mu_);
        checkpoint_stall_us_ += stall_us;
      }
      if (metrics_ != nullptr) metrics_->checkpoint_stall_seconds->Add(stall_us * 1e-6);
      last_checkpoint = options_.env->NowMicros();
    }
  }
}

void TaskRunner::Finish(TaskRun& run, int64_t num_elements) {
  absl::StatusOr<std::vector<CacheChunk>> chunks = run.Finish();
  if (!chunks.ok()) {
    // Not reported finished: the cache's manifest would miss this task's elements.
    absl::MutexLock lock(&mu_);
    finish_reported_ = false;  // A restarted run (GetElements) reports instead.
    error_ =
        Annotate(chunks.status(), absl::StrCat("task ", def().task_id(), ": finishing its run"));
    LOG(ERROR) << error_;
    return;
  }
  on_finished_(num_elements, *chunks);
}

void TaskRunner::Acknowledge(int64_t index) {
  acknowledged_ = std::max(acknowledged_, index);
  window_.Acknowledge(index);
}

absl::Status TaskRunner::GetElements(const GetElementsRequest& request, ElementsReply* reply) {
  const int64_t from = request.from_index();
  if (from < 0) return absl::InvalidArgumentError("from_index must not be negative");
  // One request at a time per task: a restart below must not race another.
  absl::MutexLock request_lock(&request_mu_);
  if (request.reader_generation() < reader_generation_) {
    return absl::AbortedError(
        absl::StrCat("task ", def().task_id(), ": reader generation ", request.reader_generation(),
                     " was taken over by reader generation ", reader_generation_,
                     " (its consumer has a new reader); this reader is fenced"));
  }
  reader_generation_ = request.reader_generation();
  {
    absl::MutexLock lock(&mu_);
    if (run_ == 0) {
      ChooseTail(request);
      StartProducer();
    }
    const int64_t window_start = window_.empty() ? produced_ : window_.front_index();
    // A run that failed on its storage (a disk failing or full under its cache or checkpoints,
    // an unreachable cache tier) starts again at the reader's next request — the storage may be
    // back — as deterministically as any restart. A failure that persists fails the new run
    // too, and the reader sees it again.
    const bool storage_failed = absl::IsInternal(error_) || absl::IsResourceExhausted(error_) ||
                                absl::IsUnavailable(error_);
    if (from < window_start || storage_failed) {
      // The client resumes from before what we still hold, or the run failed: recompute the
      // task from its start (or from its newest checkpoint at or before `from`).
      if (storage_failed) {
        LOG(WARNING) << "task " << def().task_id() << ": restarting the run that failed (" << error_
                     << ") for element " << from;
      } else {
        LOG(INFO) << "task " << def().task_id() << ": request for element " << from
                  << " below the window (" << window_start << "): restarting the task";
      }
      ++run_;  // The running producer exits at its next check.
      mu_.Unlock();
      StopProducer();
      mu_.Lock();
      window_.Clear();
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
           (!window_.empty() && window_.front_index() == from);
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(options_.poll_timeout_ms));
  RETURN_IF_ERROR(error_);
  if (!trainer_tail_.empty() && !request.runs_trainer_tail()) {
    // Another reader of the task (a consumer of a shared one) that does not run the tail.
    return absl::FailedPreconditionError(absl::StrCat(
        "task ", def().task_id(),
        " sends its elements before the pipeline's trainer-side tail, "
        "which this reader does not run: upgrade its client, or give the job tail worker"));
  }
  reply->trainer_tail = trainer_tail_;
  reply->recomputed = recomputed_ - recomputed_reported_;
  recomputed_reported_ = recomputed_;
  if (ended_ && from >= produced_) {
    if (from > produced_) {
      return absl::OutOfRangeError(absl::StrCat("task ", def().task_id(), " has only ", produced_,
                                                " elements; from_index ", from,
                                                " is past its end"));
    }
    reply->end_of_task = true;
    reply->num_elements = produced_;
    return absl::OkStatus();
  }
  reply->elements = window_.Read(std::max<int64_t>(request.max_bytes(), 1));
  return absl::OkStatus();
}

TaskStatus TaskRunner::Status() const {
  absl::MutexLock lock(&mu_);
  TaskStatus status;
  status.set_task_id(def().task_id());
  status.set_generation(def().generation());
  status.set_produced(produced_);
  status.set_window_start(window_.empty() ? produced_ : window_.front_index());
  status.set_buffered_bytes(window_.bytes());
  status.set_window_bytes(window_.max_bytes());
  status.set_finished(ended_);
  status.set_recomputed(recomputed_);
  status.set_restored_from(restored_from_);
  status.set_checkpoints_written(checkpoints_written_);
  status.set_checkpoint_bytes(checkpoint_bytes_);
  status.set_last_checkpoint_index(last_checkpoint_index_);
  status.set_checkpoint_stall_us(checkpoint_stall_us_);
  status.set_transport(transport_);
  status.set_made(made_);
  status.set_busy_us(busy_us_);
  return status;
}

void TaskRunner::NoteTransport(const char* transport) {
  absl::MutexLock lock(&mu_);
  transport_ = transport;
}

void TaskRunner::NoteSent(const std::vector<ReplyElement>& elements) {
  if (metrics_ == nullptr) return;
  int64_t served = 0, resent = 0, bytes = 0;
  {
    absl::MutexLock lock(&mu_);
    for (const ReplyElement& e : elements) {
      if (e.index >= sent_end_) {
        ++served;
        sent_end_ = e.index + 1;
      } else {
        ++resent;
      }
      bytes += static_cast<int64_t>(e.compressed != nullptr ? e.compressed->bytes().size()
                                                            : e.image->bytes().size());
    }
  }
  metrics_->served->Add(static_cast<double>(served));
  metrics_->resent->Add(static_cast<double>(resent));
  metrics_->served_bytes->Add(static_cast<double>(bytes));
}

bool TaskRunner::FullyAcknowledged() const {
  absl::MutexLock lock(&mu_);
  return ended_ && acknowledged_ >= produced_;
}

}  // namespace granary
