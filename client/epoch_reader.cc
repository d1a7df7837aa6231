#include "client/epoch_reader.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/position.h"
#include "common/grpc_status.h"
#include "common/history_log.h"
#include "common/status_macros.h"

namespace granary {
namespace {

constexpr uint64_t kInitialBackoffUs = 20'000;
// An answer carrying at least this much has the next call made while it is checked.
constexpr int64_t kCallAheadBytes = 256 << 10;
constexpr uint64_t kMaxBackoffUs = 500'000;
// Waits on the Env clock look at it at least this often (real time).
constexpr absl::Duration kClockPoll = absl::Milliseconds(50);
// A payload that fails its checksum this many times in a row is DataLoss.
constexpr int kMaxChecksumFailures = 3;

// The history's fields (common/FORMAT.md) naming a task of a consumer's epoch.
std::string TaskOfEpochFields(int64_t job_id, int64_t epoch, int32_t consumer, int64_t task_id) {
  return absl::StrCat("job=", job_id, " epoch=", epoch, " consumer=", consumer, " task=", task_id);
}

// "task:index,…" of a resumed position's next indices ("" without one).
std::string RestoredIndices(const ClientPosition* position) {
  if (position == nullptr) return "";
  std::vector<std::string> entries;
  for (const auto& [task_id, index] : position->next_index()) {
    entries.push_back(absl::StrCat(task_id, ":", index));
  }
  std::sort(entries.begin(), entries.end());
  return absl::StrJoin(entries, ",");
}

// Errors a retry cannot cure: the request itself is wrong, or the task's data is corrupt
// (recomputing it anywhere would meet the same corruption).
bool IsPermanent(absl::StatusCode code) {
  return code == absl::StatusCode::kOutOfRange || code == absl::StatusCode::kInvalidArgument ||
         code == absl::StatusCode::kUnimplemented || code == absl::StatusCode::kDataLoss;
}

}  // namespace

GrpcEpochReader::GrpcEpochReader(std::shared_ptr<Connection> connection, int64_t job_id,
                                 int64_t epoch, int32_t consumer, Compression compression,
                                 std::shared_ptr<const ReaderLease> lease)
    : connection_(std::move(connection)),
      options_(connection_->options()),
      job_id_(job_id),
      epoch_(epoch),
      consumer_(consumer),
      compression_(compression),
      lease_(std::move(lease)),
      queue_bound_(2 * options_.max_bytes_per_request),
      call_ahead_pool_(std::max(1, options_.max_outstanding_requests)) {}

absl::StatusOr<std::unique_ptr<GrpcEpochReader>> GrpcEpochReader::Start(
    std::shared_ptr<Connection> connection, int64_t job_id, int64_t epoch, int32_t consumer,
    const ClientPosition* position, Compression compression,
    std::shared_ptr<const ReaderLease> lease) {
  std::unique_ptr<GrpcEpochReader> reader(new GrpcEpochReader(
      std::move(connection), job_id, epoch, consumer, compression, std::move(lease)));
  // Like every dispatcher call, asked again while Unavailable (the dispatcher restarting, or the
  // connection lost under the call) or DeadlineExceeded (the dispatcher silent or slow).
  absl::Status first;
  reader->connection_->RepeatWhileUnreachable([&] {
    first = reader->Heartbeat();
    return absl::IsUnavailable(first) || absl::IsDeadlineExceeded(first);
  });
  RETURN_IF_ERROR(first);
  {
    absl::MutexLock lock(&reader->mu_);
    if (position != nullptr) {
      for (const auto& [task_id, index] : position->next_index()) {
        auto it = reader->tasks_.find(task_id);
        if (it == reader->tasks_.end()) {
          std::vector<int64_t> ids;
          for (const auto& entry : reader->tasks_) ids.push_back(entry.first);
          return absl::InvalidArgumentError(
              absl::StrCat("position names task ", task_id, ", which consumer ", consumer,
                           " does not read in epoch ", epoch, " of job ", job_id,
                           " (its tasks: ", absl::StrJoin(ids, ", "), ")"));
        }
        Task& task = *it->second;
        if (index < task.start_index) {
          return absl::InvalidArgumentError(
              absl::StrCat("position: task ", task_id, " is read by consumer ", consumer,
                           " from index ", task.start_index, "; cannot resume it at ", index));
        }
        if (task.finished && index > task.num_elements) {
          return absl::InvalidArgumentError(
              absl::StrCat("position: task ", task_id, " has ", task.num_elements,
                           " elements; cannot resume it at index ", index));
        }
        task.next_fetch = task.next_deliver = index;
      }
      int64_t read = 0;
      for (const auto& [id, task] : reader->tasks_) {
        read += task->delivered();
      }
      if (position->dropped() < 0 || position->padded() < 0 || position->dropped() > read) {
        return absl::InvalidArgumentError(absl::StrCat(
            "position: ", position->dropped(), " elements dropped and ", position->padded(),
            " padded of the ", read, " it read: not a position a reader saved"));
      }
      // Not a new gate: the first heartbeat's news of the other consumers stays. Without it
      // the gate would let a resumed consumer end (pad) or deliver (drop) as if it were alone
      // until the next heartbeat (granary chaos --scenario equal_shares --seed 2).
      reader->gate_.Resume(read - position->dropped(), position->dropped(), position->padded());
      reader->stats_.remainder_dropped = position->dropped();
      reader->stats_.padding = position->padded();
      reader->SeedPadding();
    }
    GRANARY_HISTORY_RECORD("read_epoch", "info", "job=", job_id, " epoch=", epoch,
                           " consumer=", consumer, " restored=", RestoredIndices(position));
    reader->last_answer_us_ = reader->connection_->env()->NowMicros();
    for (auto& entry : reader->tasks_) reader->StartFetching(entry.second.get());
    reader->fetching_ = true;
  }
  GrpcEpochReader* r = reader.get();
  reader->heartbeat_thread_ = std::thread([r] { r->HeartbeatLoop(); });
  return reader;
}

void GrpcEpochReader::SeedPadding() {
  if (gate_.delivered() == 0) return;
  if (gate_.remainder() != REMAINDER_PAD) return;
  // The task this consumer had delivered the most of (ties: the lowest id): its last delivered
  // element.
  Task* seed = nullptr;
  for (auto& [id, task] : tasks_) {
    const int64_t own = task->delivered();
    if (own > 0 && (seed == nullptr || own > seed->delivered())) {
      seed = task.get();
    }
  }
  if (seed == nullptr) return;
  // Its last delivered element: the last index below next_deliver it reads.
  int64_t last = seed->next_deliver - 1;
  while (!seed->stride.Reads(last)) --last;
  seed->pad_seed_index = last;
  seed->next_fetch = last;
}

void GrpcEpochReader::StartFetching(Task* task) {
  fetch_threads_.emplace_back([this, task] { FetchLoop(task); });
}

void GrpcEpochReader::MarkDone(Task* task) {
  task->done = true;
  GRANARY_HISTORY_RECORD("task_done", "info",
                         TaskOfEpochFields(job_id_, epoch_, consumer_, task->id),
                         " elements=", task->next_fetch);
  if (!tasks_final_ && std::all_of(tasks_.begin(), tasks_.end(),
                                   [](const auto& entry) { return entry.second->done; })) {
    heartbeat_wanted_ = true;
  }
}

GrpcEpochReader::~GrpcEpochReader() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    for (auto& entry : tasks_) {
      if (entry.second->call != nullptr) entry.second->call->TryCancel();
      if (entry.second->ahead_call != nullptr) entry.second->ahead_call->TryCancel();
    }
    if (heartbeat_call_ != nullptr) heartbeat_call_->TryCancel();
  }
  // The heartbeat thread starts fetch threads: join it first, then no more appear.
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  std::vector<std::thread> fetchers;
  {
    absl::MutexLock lock(&mu_);
    fetchers.swap(fetch_threads_);
  }
  for (std::thread& thread : fetchers) thread.join();
}

bool GrpcEpochReader::AwaitUntil(const absl::Condition& condition, uint64_t deadline_us) {
  Env* const env = connection_->env();
  while (!condition.Eval()) {
    const uint64_t now = env->NowMicros();
    if (now >= deadline_us) return false;
    mu_.AwaitWithTimeout(condition, std::min(absl::Microseconds(deadline_us - now), kClockPoll));
  }
  return true;
}

absl::Status GrpcEpochReader::Next(ReceivedElement* element, bool* end) {
  *end = false;
  absl::MutexLock lock(&mu_);
  const uint64_t start = connection_->env()->NowMicros();
  // The trainer's step: from the last element handed out to this call.
  if (last_delivered_us_ > 0) step_us_ += start - last_delivered_us_;
  const uint64_t stall_us = static_cast<uint64_t>(options_.stall_timeout_ms) * 1000;
  if (HeartbeatOverdue()) {
    // Frozen for a while: find out whether another reader took over before handing anything out.
    heartbeat_wanted_ = true;
    const int64_t before = heartbeats_completed_;
    const auto heard = [this, before]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || heartbeats_completed_ > before;
    };
    AwaitUntil(absl::Condition(&heard),
               start + 1000 * static_cast<uint64_t>(options_.rpc_timeout_ms +
                                                    options_.heartbeat_interval_ms));
  }
  const absl::Condition ready(this, &GrpcEpochReader::ReadyToDeliver);
  // Held back for the others' news: ask for it now (then every kOthersPollMicros).
  if (WaitingForOthers()) heartbeat_wanted_ = true;
  while (true) {
    // A worker's answer moves the deadline on: wait again until then.
    while (!AwaitUntil(ready, std::max(start, last_answer_us_) + stall_us)) {
      if (connection_->env()->NowMicros() >= std::max(start, last_answer_us_) + stall_us) {
        return absl::UnavailableError(StallMessage());
      }
    }
    if (!fenced_.ok()) return fenced_;
    switch (GateAction()) {
      case EqualShareGate::Action::kDrop: {
        // REMAINDER_DROP: read, counted and shown to the observer, not delivered.
        Queued dropped = PopFront("dropped");
        gate_.Dropped();
        ++stats_.remainder_dropped;
        if (drop_observer_) {
          const std::function<void(const ReceivedElement&)> observer = drop_observer_;
          mu_.Unlock();
          observer(dropped.element);
          mu_.Lock();
        }
        continue;
      }
      case EqualShareGate::Action::kDeliver: {
        Queued front = PopFront("ok");
        gate_.Delivered();
        ++stats_.elements;
        stats_.payload_bytes += front.bytes;
        if (front.shared_memory) ++stats_.shared_memory_elements;
        if (front.trainer_tail) ++stats_.trainer_tail_elements;
        // Kept only when it may be padded with: it holds its receive buffer or segment.
        if (gate_.remainder() == REMAINDER_PAD) last_delivered_ = front.element;
        *element = std::move(front.element);
        last_delivered_us_ = connection_->env()->NowMicros();
        stats_.wait_us += static_cast<int64_t>(last_delivered_us_ - start);
        return absl::OkStatus();
      }
      case EqualShareGate::Action::kPad: {
        // A copy of its own last element; one that had none (a share left empty by an elastic
        // resume) pads with an element of a task it shares with other consumers.
        const std::optional<ReceivedElement>& model =
            last_delivered_.has_value() ? last_delivered_ : passed_over_sample_;
        if (!model.has_value()) {
          return absl::FailedPreconditionError(absl::StrCat(
              "job ", job_id_, " epoch ", epoch_, " consumer ", consumer_,
              ": remainder pad needs an element to pad with, and this consumer's share gave "
              "none"));
        }
        GRANARY_HISTORY_RECORD("pad", "info", "job=", job_id_, " epoch=", epoch_,
                               " consumer=", consumer_, " padded=", gate_.padded() + 1);
        gate_.Padded();
        ++stats_.padding;
        *element = model->AsPadding();
        last_delivered_us_ = connection_->env()->NowMicros();
        stats_.wait_us += static_cast<int64_t>(last_delivered_us_ - start);
        return absl::OkStatus();
      }
      case EqualShareGate::Action::kWait:
      case EqualShareGate::Action::kEnd:
        break;
    }
    // A permanent error is returned once the elements queued before it are out.
    if (!error_.ok()) return error_;
    if (GateAction() == EqualShareGate::Action::kEnd) break;
  }
  *end = true;
  if (!end_reported_) {
    // The dispatcher learns at once that this consumer read its tasks to their end (their
    // workers may drop them; the job's metrics count every element), not at the next periodic
    // heartbeat, which a reader destroyed right after its end never sends.
    end_reported_ = true;
    mu_.Unlock();
    Heartbeat(/*final_report=*/true).IgnoreError();
    mu_.Lock();
  }
  return absl::OkStatus();
}

GrpcEpochReader::Queued GrpcEpochReader::PopFront(const char* outcome) {
  Queued front = std::move(queue_.front());
  queue_.pop_front();
  Task& task = *tasks_.at(front.task_id);
  task.next_deliver = front.index + 1;
  PassOver(task);
  GRANARY_HISTORY_RECORD("deliver", outcome,
                         TaskOfEpochFields(job_id_, epoch_, consumer_, front.task_id),
                         " index=", front.index, " gen=", task.generation);
  queued_bytes_ -= front.bytes;
  return front;
}

void GrpcEpochReader::SetDropObserver(std::function<void(const ReceivedElement&)> observer) {
  absl::MutexLock lock(&mu_);
  drop_observer_ = std::move(observer);
}

std::string GrpcEpochReader::SavePosition() const {
  ClientPosition position;
  position.set_job_id(job_id_);
  position.set_epoch(epoch_);
  position.set_consumer(consumer_);
  absl::MutexLock lock(&mu_);
  for (const auto& [id, task] : tasks_) (*position.mutable_next_index())[id] = task->next_deliver;
  position.set_dropped(gate_.dropped());
  position.set_padded(gate_.padded());
  return EncodePosition(position);
}

EpochStats GrpcEpochReader::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

bool GrpcEpochReader::AllDone() const {
  return tasks_final_ && std::all_of(tasks_.begin(), tasks_.end(),
                                     [](const auto& entry) { return entry.second->done; });
}

std::string GrpcEpochReader::StallMessage() const {
  std::vector<std::string> waiting;
  for (const auto& [id, task] : tasks_) {
    if (task->done) continue;
    if (task->address.empty()) {
      waiting.push_back(
          absl::StrCat("task ", id, " at index ", task->next_fetch, ": no live worker runs it"));
    } else {
      waiting.push_back(absl::StrCat(
          "task ", id, " at index ", task->next_fetch, " (worker ", task->address, ", generation ",
          task->generation, "): ", task->last_error.empty() ? "no element yet" : task->last_error));
    }
  }
  std::string message = absl::StrCat("job ", job_id_, " epoch ", epoch_, " consumer ", consumer_,
                                     ": no worker answered for ", options_.stall_timeout_ms,
                                     " ms; ", absl::StrJoin(waiting, "; "));
  if (!queue_.empty() || AllDone()) {
    // Its own elements are there: it waits for the other consumers' (equal shares).
    absl::StrAppend(&message, "; waiting for the other consumers: ", gate_.Describe());
  }
  if (!heartbeat_error_.empty()) absl::StrAppend(&message, "; dispatcher: ", heartbeat_error_);
  return message;
}

void GrpcEpochReader::SetPermanentError(absl::Status status) {
  if (error_.ok()) error_ = std::move(status);
}

void GrpcEpochReader::Fence(absl::Status status) {
  if (!fenced_.ok()) return;
  GRANARY_HISTORY_RECORD("fenced", "info", "job=", job_id_, " epoch=", epoch_,
                         " consumer=", consumer_);
  fenced_ = status;
  // The fetch threads stop as for a permanent error.
  SetPermanentError(std::move(status));
}

bool GrpcEpochReader::HeartbeatOverdue() const {
  if (lease_ == nullptr || heartbeat_call_ != nullptr || end_reported_) return false;
  const uint64_t interval_us = static_cast<uint64_t>(options_.heartbeat_interval_ms) * 1000;
  return connection_->env()->NowMicros() > heartbeat_completed_us_ + 3 * interval_us;
}

absl::Status GrpcEpochReader::Heartbeat(bool final_report) {
  ClientHeartbeatRequest request;
  request.set_job_id(job_id_);
  request.set_epoch(epoch_);
  request.set_consumer(consumer_);
  if (lease_ != nullptr) request.set_reader_id(lease_->reader_id());
  std::unique_ptr<grpc::ClientContext> context = connection_->DispatcherContext();
  if (final_report) {
    // Best effort, and quick: a dispatcher that is down does not hold up the epoch's end.
    context->set_wait_for_ready(false);
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return absl::CancelledError("reader stopped");
    // A task being fetched again to pad with (Task::pad_seed_index) counts as unread until then,
    // so that its worker keeps serving it.
    for (const auto& [id, task] : tasks_) {
      (*request.mutable_next_index())[id] = std::min(task->next_deliver, task->next_fetch);
      (*request.mutable_received())[id] = std::max(task->next_deliver, task->next_fetch);
      if (task->done) (*request.mutable_ended())[id] = task->next_fetch;
    }
    request.set_delivered(stats_.elements);
    request.set_wait_us(stats_.wait_us);
    request.set_step_us(static_cast<int64_t>(step_us_));
    heartbeat_call_ = context.get();
  }
  ClientHeartbeatResponse response;
  const DispatcherTargets::Target dispatcher = connection_->dispatcher().Current();
  const grpc::Status rpc = dispatcher.stub->ClientHeartbeat(context.get(), request, &response);
  // The next heartbeat goes to the leader a replica named, or to the next replica.
  if (!rpc.ok()) connection_->dispatcher().AfterFailure(dispatcher.address, *context, rpc);
  absl::MutexLock lock(&mu_);
  heartbeat_call_ = nullptr;
  ++heartbeats_completed_;
  heartbeat_completed_us_ = connection_->env()->NowMicros();
  if (!rpc.ok()) {
    const absl::Status status = Annotate(
        FromGrpcStatus(rpc), absl::StrCat("ClientHeartbeat to ", options_.dispatcher_address));
    heartbeat_error_ = status.ToString();
    if (absl::IsAborted(status)) Fence(status);
    return status;
  }
  heartbeat_error_.clear();
  for (const TaskInfo& info : response.tasks()) {
    auto it = tasks_.find(info.task_id());
    const bool added = it == tasks_.end();
    if (added) {
      auto task = std::make_unique<Task>();
      task->id = info.task_id();
      task->start_index = task->next_fetch = task->next_deliver = info.start_index();
      it = tasks_.emplace(info.task_id(), std::move(task)).first;
    }
    Task& task = *it->second;
    task.stride = ReadStride(info.read_stride(), info.read_offset());
    task.address = info.worker_address();
    task.shm_nonce = info.worker_shm_nonce();
    task.generation = info.generation();
    task.capability = info.capability();
    task.finished = info.finished();
    task.num_elements = info.num_elements();
    if (added && fetching_ && !stop_) StartFetching(&task);
  }
  tasks_final_ = response.tasks_final();
  if (response.has_others()) gate_.Learn(response.others());
  return absl::OkStatus();
}

void GrpcEpochReader::HeartbeatLoop() {
  const uint64_t interval_us = static_cast<uint64_t>(options_.heartbeat_interval_ms) * 1000;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      const uint64_t wait_us =
          WaitingForOthers() ? std::min(interval_us, kOthersPollMicros) : interval_us;
      AwaitUntil(absl::Condition(this, &GrpcEpochReader::HeartbeatDue),
                 connection_->env()->NowMicros() + wait_us);
      if (stop_ || !fenced_.ok()) return;
      heartbeat_wanted_ = false;
    }
    // A failure is recorded in heartbeat_error_; the fetch threads keep using the addresses
    // they know.
    Heartbeat().IgnoreError();
  }
}

absl::StatusOr<std::shared_ptr<const TrainerTailRunner>> GrpcEpochReader::TailRunner(
    const std::string& serialized) {
  absl::MutexLock lock(&tail_mu_);
  auto it = tail_runners_.find(serialized);
  if (it != tail_runners_.end()) return it->second;
  TrainerTailDef def;
  if (!def.ParseFromString(serialized)) {
    return absl::InvalidArgumentError("its answer's trainer-side tail does not parse");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const TrainerTailRunner> runner, TrainerTailRunner::Create(def));
  // A job has one tail; a worker answering with ever new ones does not grow this without bound.
  if (tail_runners_.size() >= 16) tail_runners_.clear();
  tail_runners_.emplace(serialized, runner);
  return runner;
}

void GrpcEpochReader::PassOver(Task& task) {
  while (task.next_deliver < task.next_fetch && !task.stride.Reads(task.next_deliver)) {
    ++task.next_deliver;
  }
}

GrpcEpochReader::Checked GrpcEpochReader::CheckAnswer(int64_t task_id, int64_t from_index,
                                                      const ReadStride& stride, bool want_sample,
                                                      const std::string& address,
                                                      const ReceivedReply& reply,
                                                      ElementChannel& channel,
                                                      const TrainerTailRunner* tail) {
  Checked checked;
  if (!reply.malformed.ok()) {
    checked.problem = absl::StrCat("worker ", address, ": ", reply.malformed.message());
    return checked;
  }
  int64_t next = from_index;
  for (const ReceivedPayload& e : reply.elements) {
    if (e.index < next) {
      ++checked.duplicates;
      continue;
    }
    if (e.index > next) {
      checked.problem = absl::StrCat("worker ", address, " answered index ", e.index, " of task ",
                                     task_id, " when index ", next, " was due");
      break;
    }
    const ReceivedImage image = channel.Receive(e);
    const std::string what =
        absl::StrCat("task ", task_id, " element ", next, " from worker ", address, ": ");
    // Another consumer's index of a shared task is only checked, unless it is kept as a sample.
    const bool kept =
        stride.Reads(next) || (want_sample && !checked.passed_over_sample.has_value());
    absl::StatusOr<ReceivedElement> element = absl::UnknownError("not received");
    if (image.outcome != ReceivedImage::Outcome::kOk) {
      element = image.error;
    } else if (tail != nullptr && kept) {
      // The worker left the pipeline's last normalize steps to this reader.
      absl::StatusOr<BufferRef> tailed = tail->Run(image.bytes, BufferPool::Default());
      if (absl::IsResourceExhausted(tailed.status())) {
        // No buffer right now: asked for again, as a failed call is.
        checked.problem = absl::StrCat(what, tailed.status().ToString());
        break;
      }
      if (!tailed.ok()) {
        checked.permanent = Annotate(tailed.status(), absl::StrCat("task ", task_id, " element ",
                                                                   next, " from worker ", address));
        break;
      }
      element = ReceivedElement::View(*tailed, (*tailed)->bytes());
    } else {
      element = ReceivedElement::View(image.owner, image.bytes);
    }
    if (image.outcome == ReceivedImage::Outcome::kRetry) {
      checked.problem = absl::StrCat(what, image.error.ToString());
      break;
    }
    if (image.outcome == ReceivedImage::Outcome::kChecksumMismatch) {
      checked.checksum_mismatch = true;
      checked.problem = absl::StrCat(what, image.error.message());
      break;
    }
    if (!element.ok()) {
      checked.permanent = absl::DataLossError(absl::StrCat(
          what, "payload of ", e.payload.size(),
          " bytes matches its checksum but is not an element: ", element.status().message()));
      break;
    }
    ++checked.taken;
    if (!stride.Reads(next)) {
      // Another consumer's index of a shared task: checked, not kept (but for a sample).
      if (want_sample && !checked.passed_over_sample.has_value()) {
        checked.passed_over_sample = *std::move(element);
      }
      ++next;
      continue;
    }
    Queued queued;
    queued.task_id = task_id;
    queued.index = next;
    queued.bytes = static_cast<int64_t>(element->bytes().size());
    queued.shared_memory = image.mapped;
    queued.trainer_tail = tail != nullptr;  // (kept: it ran)
    queued.element = *std::move(element);
    checked.accepted.push_back(std::move(queued));
    ++next;
  }
  return checked;
}

std::unique_ptr<GrpcEpochReader::Call> GrpcEpochReader::MaybeCallAhead(
    Task* task, const GetElementsRequest& request, const std::string& address,
    const ReceivedReply& reply) {
  if (!reply.malformed.ok() || reply.end_of_task) return nullptr;
  // Where the task will stand once this answer's elements are accepted.
  int64_t next = request.from_index();
  int64_t bytes = 0;
  for (const ReceivedPayload& e : reply.elements) {
    if (e.index < next) continue;
    if (e.index > next) break;
    ++next;
    bytes += e.element_size();
  }
  if (next == request.from_index() || bytes < kCallAheadBytes) return nullptr;
  auto ahead = std::make_unique<Call>();
  {
    absl::MutexLock lock(&mu_);
    if (stop_ || !error_.ok() || task->address != address ||
        task->generation != request.generation() ||
        in_flight_ >= options_.max_outstanding_requests || queued_bytes_ + bytes >= queue_bound_) {
      return nullptr;
    }
    ++in_flight_;
    ahead->context = connection_->WorkerContext();
    ahead->shm_nonce = task->shm_nonce;
    task->ahead_call = ahead->context.get();
  }
  ahead->request = request;
  ahead->request.set_from_index(next);
  ahead->address = address;
  ahead->made_ahead = true;
  call_ahead_pool_.Schedule([this, a = ahead.get()] {
    a->channel = connection_->ElementChannelTo(a->address, a->shm_nonce);
    a->rpc = a->channel->Fetch(a->context.get(), a->request, &a->reply);
    a->answered.Notify();
  });
  return ahead;
}

void GrpcEpochReader::FetchLoop(Task* task) {
  uint64_t backoff_us = kInitialBackoffUs;
  // The next call, made while the answer before it is checked (see MaybeCallAhead).
  std::unique_ptr<Call> ahead;
  while (true) {
    const bool made_ahead = ahead != nullptr;
    std::unique_ptr<Call> call;
    if (made_ahead) {
      ahead->answered.WaitForNotification();
      bool usable;
      {
        absl::MutexLock lock(&mu_);
        --in_flight_;
        task->ahead_call = nullptr;
        if (stop_) return;
        // The answer before it was accepted whole: this call asked from where the task stands.
        usable = error_.ok() && ahead->request.from_index() == task->next_fetch &&
                 ahead->address == task->address && ahead->request.generation() == task->generation;
      }
      call = std::move(ahead);
      if (!usable) continue;
    } else {
      call = std::make_unique<Call>();
      call->context = connection_->WorkerContext();
      absl::MutexLock lock(&mu_);
      const auto ready = [this, task]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        if (stop_ || !error_.ok() || task->done) return true;
        if (task->finished && task->next_fetch >= task->num_elements) return true;
        return !task->address.empty() && queued_bytes_ < queue_bound_;
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_ || !error_.ok() || task->done) return;
      if (task->finished && task->next_fetch >= task->num_elements) {
        if (task->next_fetch == task->num_elements) {
          MarkDone(task);
        } else {
          SetPermanentError(absl::OutOfRangeError(
              absl::StrCat("task ", task->id, " finished with ", task->num_elements,
                           " elements, but the reader is at index ", task->next_fetch)));
        }
        return;
      }
      // Take a permit for a call, first come first served: a task that has just had one must
      // not starve the others (its thread would otherwise tend to win the mutex again).
      permit_queue_.push_back(task->id);
      const auto my_turn = [this, task]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !error_.ok() ||
               (permit_queue_.front() == task->id &&
                in_flight_ < options_.max_outstanding_requests);
      };
      mu_.Await(absl::Condition(&my_turn));
      permit_queue_.erase(std::find(permit_queue_.begin(), permit_queue_.end(), task->id));
      if (stop_ || !error_.ok()) return;
      // A heartbeat may have taken the worker away meanwhile: wait for the next one.
      if (task->address.empty()) continue;
      ++in_flight_;
      call->request.set_task_id(task->id);
      call->request.set_generation(task->generation);
      if (lease_ != nullptr) call->request.set_reader_generation(lease_->generation());
      call->request.set_capability(task->capability);
      call->request.set_from_index(task->next_fetch);
      call->request.set_max_bytes(options_.max_bytes_per_request);
      call->request.set_compression(compression_);
      call->request.set_runs_trainer_tail(true);
      call->address = task->address;
      call->shm_nonce = task->shm_nonce;
      // Set under the lock, so that the destructor either sees the context and cancels it,
      // or has set stop_ before we got here (checked above).
      task->call = call->context.get();
    }
    const GetElementsRequest& request = call->request;
    const std::string& address = call->address;
    const ReceivedReply& reply = call->reply;
    if (!made_ahead) {
      call->channel = connection_->ElementChannelTo(address, call->shm_nonce);
      call->rpc = call->channel->Fetch(call->context.get(), request, &call->reply);
      absl::MutexLock lock(&mu_);
      --in_flight_;
      task->call = nullptr;
    }
    const absl::Status& rpc = call->rpc;
    if (rpc.ok()) ahead = MaybeCallAhead(task, request, address, reply);
    Checked checked;
    if (rpc.ok()) {
      ReadStride stride;
      bool want_sample;
      {
        absl::MutexLock lock(&mu_);
        stride = task->stride;
        want_sample = !passed_over_sample_.has_value();
      }
      std::shared_ptr<const TrainerTailRunner> tail;
      if (!reply.trainer_tail.empty()) {
        absl::StatusOr<std::shared_ptr<const TrainerTailRunner>> runner =
            TailRunner(reply.trainer_tail);
        if (runner.ok()) {
          tail = *std::move(runner);
        } else {
          checked.permanent =
              Annotate(runner.status(), absl::StrCat("task ", task->id, ": worker ", address));
        }
      }
      if (checked.permanent.ok()) {
        checked = CheckAnswer(task->id, request.from_index(), stride, want_sample, address, reply,
                              *call->channel, tail.get());
      }
    }

    absl::MutexLock lock(&mu_);
    if (stop_) return;
    bool retry = false;
    if (!rpc.ok()) {
      if (rpc.code() == absl::StatusCode::kAborted) {
        Fence(Annotate(rpc, absl::StrCat("task ", task->id, ": worker ", address)));
        return;
      }
      if (IsPermanent(rpc.code())) {
        SetPermanentError(Annotate(
            rpc, absl::StrCat("task ", task->id, " at index ", request.from_index(), ": worker ",
                              address, " (generation ", request.generation(), ")")));
        return;
      }
      // The worker's address and generation are in StallMessage().
      task->last_error = rpc.ToString();
      ++stats_.retries;
      retry = true;
    } else {
      last_answer_us_ = connection_->env()->NowMicros();
      stats_.recomputed_dropped += reply.recomputed;
      stats_.duplicates_dropped += checked.duplicates;
      if (checked.duplicates > 0) {
        GRANARY_HISTORY_RECORD("drop_dup", "info",
                               TaskOfEpochFields(job_id_, epoch_, consumer_, task->id),
                               " count=", checked.duplicates, " below=", request.from_index());
      }
      task->next_fetch += checked.taken;
      PassOver(*task);
      if (!passed_over_sample_.has_value() && checked.passed_over_sample.has_value()) {
        passed_over_sample_ = std::move(checked.passed_over_sample);
      }
      for (Queued& queued : checked.accepted) {
        if (queued.index == task->pad_seed_index) {
          last_delivered_ = std::move(queued.element);
          task->pad_seed_index = -1;
          continue;
        }
        queued_bytes_ += queued.bytes;
        queue_.push_back(std::move(queued));
      }
      if (task->checksum_index < task->next_fetch) task->checksum_failures = 0;
      if (!checked.permanent.ok()) {
        SetPermanentError(checked.permanent);
        return;
      }
      if (checked.checksum_mismatch) {
        ++stats_.checksum_mismatches;
        if (task->checksum_index != task->next_fetch) task->checksum_failures = 0;
        task->checksum_index = task->next_fetch;
        if (++task->checksum_failures >= kMaxChecksumFailures) {
          SetPermanentError(absl::DataLossError(
              absl::StrCat(checked.problem, "; ", task->checksum_failures, " times in a row")));
          return;
        }
      }
      if (!checked.problem.empty()) {
        task->last_error = checked.problem;
        ++stats_.retries;
        retry = true;
      } else if (reply.end_of_task) {
        if (reply.num_elements == task->next_fetch) {
          MarkDone(task);
          return;
        }
        const std::string problem = absl::StrCat(
            "worker ", address, " says task ", task->id, " ends with ", reply.num_elements,
            " elements; the reader is at index ", task->next_fetch);
        if (reply.num_elements < task->next_fetch) {
          SetPermanentError(absl::OutOfRangeError(problem));
          return;
        }
        task->last_error = problem;
        ++stats_.retries;
        retry = true;
      } else {
        task->last_error.clear();
        backoff_us = kInitialBackoffUs;
      }
    }
    if (retry) {
      // Back off, but wake as soon as a heartbeat names another worker or generation.
      const int64_t generation = request.generation();
      const auto changed = [this, task, &address, generation]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || task->address != address || task->generation != generation;
      };
      AwaitUntil(absl::Condition(&changed), connection_->env()->NowMicros() + backoff_us);
      backoff_us = std::min(backoff_us * 2, kMaxBackoffUs);
    }
  }
}

}  // namespace granary
