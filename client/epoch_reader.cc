#include "client/epoch_reader.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/position.h"
#include "common/grpc_status.h"
#include "common/hash.h"
#include "common/status_macros.h"

namespace granary {
namespace {

constexpr absl::Duration kInitialBackoff = absl::Milliseconds(20);
constexpr absl::Duration kMaxBackoff = absl::Milliseconds(500);
// A payload that fails its checksum this many times in a row is DataLoss.
constexpr int kMaxChecksumFailures = 3;

// Errors a retry cannot cure: the request itself is wrong, or the task's data is corrupt
// (recomputing it anywhere would meet the same corruption).
bool IsPermanent(absl::StatusCode code) {
  return code == absl::StatusCode::kOutOfRange || code == absl::StatusCode::kInvalidArgument ||
         code == absl::StatusCode::kUnimplemented || code == absl::StatusCode::kDataLoss;
}

}  // namespace

GrpcEpochReader::GrpcEpochReader(std::shared_ptr<Connection> connection, int64_t job_id,
                                 int64_t epoch, int32_t consumer)
    : connection_(std::move(connection)),
      options_(connection_->options()),
      job_id_(job_id),
      epoch_(epoch),
      consumer_(consumer),
      queue_bound_(2 * options_.max_bytes_per_request) {}

absl::StatusOr<std::unique_ptr<GrpcEpochReader>> GrpcEpochReader::Start(
    std::shared_ptr<Connection> connection, int64_t job_id, int64_t epoch, int32_t consumer,
    const ClientPosition* position) {
  std::unique_ptr<GrpcEpochReader> reader(
      new GrpcEpochReader(std::move(connection), job_id, epoch, consumer));
  RETURN_IF_ERROR(reader->Heartbeat(/*first=*/true));
  std::vector<Task*> tasks;
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
        if (task.finished && index > task.num_elements) {
          return absl::InvalidArgumentError(
              absl::StrCat("position: task ", task_id, " has ", task.num_elements,
                           " elements; cannot resume it at index ", index));
        }
        task.next_fetch = task.next_deliver = index;
      }
    }
    reader->last_answer_ = absl::Now();
    for (auto& entry : reader->tasks_) tasks.push_back(entry.second.get());
  }
  GrpcEpochReader* r = reader.get();
  reader->threads_.emplace_back([r] { r->HeartbeatLoop(); });
  for (Task* task : tasks) reader->threads_.emplace_back([r, task] { r->FetchLoop(task); });
  return reader;
}

GrpcEpochReader::~GrpcEpochReader() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    for (auto& entry : tasks_) {
      if (entry.second->call != nullptr) entry.second->call->TryCancel();
    }
    if (heartbeat_call_ != nullptr) heartbeat_call_->TryCancel();
  }
  for (std::thread& thread : threads_) thread.join();
}

absl::Status GrpcEpochReader::Next(ElementProto* element, bool* end) {
  *end = false;
  absl::MutexLock lock(&mu_);
  const absl::Time start = absl::Now();
  const absl::Duration stall = absl::Milliseconds(options_.stall_timeout_ms);
  const auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !queue_.empty() || !error_.ok() || AllDone();
  };
  while (!ready()) {
    const absl::Time deadline = std::max(start, last_answer_) + stall;
    if (absl::Now() >= deadline) return absl::UnavailableError(StallMessage());
    mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  }
  if (!queue_.empty()) {
    Queued& front = queue_.front();
    tasks_.at(front.task_id)->next_deliver = front.index + 1;
    ++stats_.elements;
    stats_.payload_bytes += front.bytes;
    queued_bytes_ -= front.bytes;
    *element = std::move(front.element);
    queue_.pop_front();
    return absl::OkStatus();
  }
  if (!error_.ok()) return error_;
  *end = true;
  return absl::OkStatus();
}

std::string GrpcEpochReader::SavePosition() const {
  ClientPosition position;
  position.set_job_id(job_id_);
  position.set_epoch(epoch_);
  position.set_consumer(consumer_);
  absl::MutexLock lock(&mu_);
  for (const auto& [id, task] : tasks_) (*position.mutable_next_index())[id] = task->next_deliver;
  return EncodePosition(position);
}

EpochStats GrpcEpochReader::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

bool GrpcEpochReader::AllDone() const {
  return std::all_of(tasks_.begin(), tasks_.end(),
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
  if (!heartbeat_error_.empty()) absl::StrAppend(&message, "; dispatcher: ", heartbeat_error_);
  return message;
}

void GrpcEpochReader::SetPermanentError(absl::Status status) {
  if (error_.ok()) error_ = std::move(status);
}

absl::Status GrpcEpochReader::Heartbeat(bool first) {
  ClientHeartbeatRequest request;
  request.set_job_id(job_id_);
  request.set_epoch(epoch_);
  request.set_consumer(consumer_);
  std::unique_ptr<grpc::ClientContext> context = connection_->DispatcherContext();
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return absl::CancelledError("reader stopped");
    for (const auto& [id, task] : tasks_) (*request.mutable_next_index())[id] = task->next_deliver;
    heartbeat_call_ = context.get();
  }
  ClientHeartbeatResponse response;
  const grpc::Status rpc =
      connection_->dispatcher().ClientHeartbeat(context.get(), request, &response);
  absl::MutexLock lock(&mu_);
  heartbeat_call_ = nullptr;
  if (!rpc.ok()) {
    const absl::Status status = Annotate(
        FromGrpcStatus(rpc), absl::StrCat("ClientHeartbeat to ", options_.dispatcher_address));
    heartbeat_error_ = status.ToString();
    return status;
  }
  heartbeat_error_.clear();
  for (const TaskInfo& info : response.tasks()) {
    auto it = tasks_.find(info.task_id());
    if (it == tasks_.end()) {
      // The task set is fixed when the epoch starts; a task appearing later is ignored.
      if (!first) continue;
      auto task = std::make_unique<Task>();
      task->id = info.task_id();
      it = tasks_.emplace(info.task_id(), std::move(task)).first;
    }
    Task& task = *it->second;
    task.address = info.worker_address();
    task.generation = info.generation();
    task.finished = info.finished();
    task.num_elements = info.num_elements();
  }
  return absl::OkStatus();
}

void GrpcEpochReader::HeartbeatLoop() {
  const absl::Duration interval = absl::Milliseconds(options_.heartbeat_interval_ms);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), interval);
      if (stop_) return;
    }
    // A failure is recorded in heartbeat_error_; the fetch threads keep using the addresses
    // they know.
    Heartbeat(/*first=*/false).IgnoreError();
  }
}

GrpcEpochReader::Checked GrpcEpochReader::CheckAnswer(int64_t task_id, int64_t from_index,
                                                      const std::string& address,
                                                      GetElementsResponse* response) {
  Checked checked;
  int64_t next = from_index;
  for (IndexedElement& e : *response->mutable_elements()) {
    if (e.index() < next) {
      ++checked.duplicates;
      continue;
    }
    if (e.index() > next) {
      checked.problem = absl::StrCat("worker ", address, " answered index ", e.index(), " of task ",
                                     task_id, " when index ", next, " was due");
      break;
    }
    const uint64_t hash = Hash64(e.payload());
    if (hash != e.checksum()) {
      checked.checksum_mismatch = true;
      checked.problem = absl::StrCat("task ", task_id, " element ", next, " from worker ", address,
                                     ": payload checksum mismatch (XXH64 ", HashToHex(hash),
                                     ", expected ", HashToHex(e.checksum()), ")");
      break;
    }
    Queued queued;
    queued.task_id = task_id;
    queued.index = next;
    queued.bytes = static_cast<int64_t>(e.payload().size());
    if (!queued.element.ParseFromString(e.payload())) {
      checked.permanent = absl::DataLossError(absl::StrCat(
          "task ", task_id, " element ", next, " from worker ", address, ": payload of ",
          e.payload().size(), " bytes matches its checksum but is not an ElementProto"));
      break;
    }
    e.clear_payload();
    checked.accepted.push_back(std::move(queued));
    ++next;
  }
  return checked;
}

void GrpcEpochReader::FetchLoop(Task* task) {
  absl::Duration backoff = kInitialBackoff;
  while (true) {
    GetElementsRequest request;
    std::string address;
    std::unique_ptr<grpc::ClientContext> context = connection_->WorkerContext();
    {
      absl::MutexLock lock(&mu_);
      const auto ready = [this, task]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        if (stop_ || !error_.ok() || task->done) return true;
        if (task->finished && task->next_fetch >= task->num_elements) return true;
        return !task->address.empty() && queued_bytes_ < queue_bound_;
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_ || !error_.ok() || task->done) return;
      if (task->finished && task->next_fetch >= task->num_elements) {
        if (task->next_fetch == task->num_elements) {
          task->done = true;
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
      const auto my_turn = [this, task]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
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
      request.set_task_id(task->id);
      request.set_generation(task->generation);
      request.set_from_index(task->next_fetch);
      request.set_max_bytes(options_.max_bytes_per_request);
      address = task->address;
      // Set under the lock, so that the destructor either sees the context and cancels it,
      // or has set stop_ before we got here (checked above).
      task->call = context.get();
    }
    std::shared_ptr<Worker::Stub> stub = connection_->WorkerStub(address);
    GetElementsResponse response;
    const grpc::Status rpc = stub->GetElements(context.get(), request, &response);
    Checked checked;
    if (rpc.ok()) checked = CheckAnswer(task->id, request.from_index(), address, &response);

    absl::MutexLock lock(&mu_);
    --in_flight_;
    task->call = nullptr;
    if (stop_) return;
    bool retry = false;
    if (!rpc.ok()) {
      const absl::Status status = FromGrpcStatus(rpc);
      if (IsPermanent(status.code())) {
        SetPermanentError(Annotate(
            status, absl::StrCat("task ", task->id, " at index ", request.from_index(), ": worker ",
                                 address, " (generation ", request.generation(), ")")));
        return;
      }
      // The worker's address and generation are in StallMessage().
      task->last_error = status.ToString();
      ++stats_.retries;
      retry = true;
    } else {
      last_answer_ = absl::Now();
      stats_.recomputed_dropped += response.recomputed();
      stats_.duplicates_dropped += checked.duplicates;
      task->next_fetch += static_cast<int64_t>(checked.accepted.size());
      for (Queued& queued : checked.accepted) {
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
      } else if (response.end_of_task()) {
        if (response.num_elements() == task->next_fetch) {
          task->done = true;
          return;
        }
        const std::string problem = absl::StrCat(
            "worker ", address, " says task ", task->id, " ends with ", response.num_elements(),
            " elements; the reader is at index ", task->next_fetch);
        if (response.num_elements() < task->next_fetch) {
          SetPermanentError(absl::OutOfRangeError(problem));
          return;
        }
        task->last_error = problem;
        ++stats_.retries;
        retry = true;
      } else {
        task->last_error.clear();
        backoff = kInitialBackoff;
      }
    }
    if (retry) {
      // Back off, but wake as soon as a heartbeat names another worker or generation.
      const int64_t generation = request.generation();
      const auto changed = [this, task, &address, generation]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return stop_ || task->address != address || task->generation != generation;
      };
      mu_.AwaitWithTimeout(absl::Condition(&changed), backoff);
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
  }
}

}  // namespace granary
