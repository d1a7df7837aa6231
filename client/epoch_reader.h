// GrpcEpochReader: the client half of the exactly-once protocol (DESIGN.md §4). Internal to the
// client library; trainers see it as granary::EpochReader.
//
// Walkthrough.
//  * Start() sends one ClientHeartbeat synchronously: it names the consumer's tasks (fixed for
//    the epoch) with, for each, the address of the worker running it (empty while none does),
//    its generation, and whether it has finished with how many elements. A resumed position is
//    checked against them. Then the reader starts a heartbeat thread and one fetch thread per
//    task.
//  * The heartbeat thread calls ClientHeartbeat every heartbeat_interval_ms, reporting per task
//    the index of the next element not yet returned by Next(), and records the newest address,
//    generation and completion of each task. A change wakes that task's fetch thread at once.
//  * A fetch thread keeps `next`, the index of the next element its task must deliver. It
//    waits until the task has a worker, the delivery queue holds less than its bound (2 *
//    max_bytes_per_request payload bytes) and fewer than max_outstanding_requests GetElements
//    calls are in flight across all tasks (permits go first come, first served, so no task
//    starves); then it calls GetElements(task, generation,
//    from_index = next, max_bytes) on the worker the dispatcher names (from_index also
//    acknowledges everything before it), through the element channel the connection holds for
//    that worker (Connection::ElementChannelTo: shared memory when the worker runs on this host
//    and serves it, else TCP; transport/element_channel.h). The answer arrives as gRPC's receive
//    slices (transport/elements_reply.h). In it the reader accepts only index == next: a lower
//    index is a duplicate (dropped, counted), a higher one a protocol error (the rest of the
//    answer is dropped and the call retried). The channel receives each accepted payload
//    (ElementChannel::Receive: by bytes it checks the XXH3-64 checksum and views or copies the
//    bytes; by segment it maps the worker's memory, which the element then holds until the
//    trainer drops it); a payload that fails its checksum drops the rest of the answer and the
//    call is retried, and one still wrong on the third try in a row is DataLoss naming task and
//    index; one that cannot be received now (no memory, a segment gone because the worker died)
//    is retried like a failed call. Accepted elements go to the queue in index order.
//  * Any failed call (UNAVAILABLE: worker down; NOT_FOUND: the task is not there yet;
//    FAILED_PRECONDITION: another generation; anything else but the permanent errors below)
//    is retried after a backoff of 20 ms doubling to 500 ms, cut short when a heartbeat brings
//    a new address or generation, and always against the newest ones. OUT_OF_RANGE (the task
//    ends before `next`), INVALID_ARGUMENT, UNIMPLEMENTED and DATA_LOSS (the pipeline met corrupt
//    input) are permanent: Next() returns them, after the elements already queued.
//  * A task is done when a worker answers end_of_task with num_elements == next, or the
//    dispatcher reports it finished with num_elements == next. Next() returns end when every
//    task is done and the queue is empty.
//  * Equal shares (client/equal_share_gate.h): in an epoch of equal shares the heartbeat answers
//    say what the other consumers are known to have (polled every 20 ms while the gate holds
//    Next() back for them, e.g. at the epoch's end), and Next() asks the gate before it hands an
//    element out: deliver it, drop it (REMAINDER_DROP: read, counted, shown to the drop
//    observer, not delivered), hand out padding (REMAINDER_PAD: a copy of the last element
//    delivered, marked padding()), wait, or end. A reader resumed under REMAINDER_PAD fetches
//    the last element its position delivered once more (not delivered again) to pad with, and
//    its heartbeats keep that task unread until then, so its worker still serves it.
//  * One reader per consumer (client/reader_lease.h): the reader sends its lease's reader id
//    with its heartbeats and the lease's generation with its GetElements calls. The dispatcher
//    answering a heartbeat with Aborted (another reader holds the consumer now) or a worker
//    answering a call so (it served a newer generation of reader) fences the reader: Next()
//    returns that error from then on, queued elements or not, and the reader stops moving
//    positions (the dispatcher refuses its acknowledgements from the takeover on).
//    A process that was frozen (SIGSTOP, a VM paused) may have been taken over meanwhile: Next()
//    called when no heartbeat is in flight and none completed for three intervals first waits
//    for one to complete (a dispatcher that does not answer holds it up at most rpc_timeout_ms,
//    once: while it is down a heartbeat is nearly always in flight).
//  * Exactly once: `next` only moves past an element once that element is in the queue, so no
//    element is skipped; an element is queued only at index == next, so none is queued twice.
//    SavePosition() reports, per task, one past the last element Next() returned — not what is
//    merely queued — so a reader resumed from it delivers each remaining element exactly once.
//
// Memory: the queue holds at most its bound plus one answer per in-flight call (a fetch thread
// checks the bound before asking, not after).
//
// Time: stall timeouts, heartbeat intervals and back-offs run on the connection's Env clock, so
// tests can move it (waits poll it at least every 50 ms of real time).
#ifndef GRANARY_CLIENT_EPOCH_READER_H_
#define GRANARY_CLIENT_EPOCH_READER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/connection.h"
#include "client/equal_share_gate.h"
#include "client/reader_lease.h"
#include "client/trainer_tail_runner.h"
#include "common/read_stride.h"
#include "common/thread_pool.h"
#include "granary/client.h"
#include "proto/client.pb.h"
#include "transport/elements_reply.h"

namespace granary {

// Thread-compatible like every EpochReader (one trainer thread calls Next); its own threads
// synchronize internally. The destructor stops and joins them, cancelling calls in flight.
class GrpcEpochReader final : public EpochReader {
 public:
  // Reads (job_id, epoch) as `consumer`, resuming from `position` if not null (already
  // decoded and checked against job, epoch and consumer). The epoch must exist (StartEpoch
  // done). Errors: those of the first ClientHeartbeat (e.g. InvalidArgument for a consumer the
  // job does not have; Unavailable only once Connection::RepeatWhileUnreachable gave up), and
  // InvalidArgument when `position` names a task this consumer does not read in this epoch, or an
  // index past a finished task's end. Elements sent by bytes come compressed with `compression`
  // (transport/compression.h). `lease`: the consumer's lease the reader reads under (null: a
  // reader that holds none, refused once the consumer is claimed).
  static absl::StatusOr<std::unique_ptr<GrpcEpochReader>> Start(
      std::shared_ptr<Connection> connection, int64_t job_id, int64_t epoch, int32_t consumer,
      const ClientPosition* position, Compression compression = COMPRESSION_NONE,
      std::shared_ptr<const ReaderLease> lease = nullptr);

  ~GrpcEpochReader() override;
  GrpcEpochReader(const GrpcEpochReader&) = delete;
  GrpcEpochReader& operator=(const GrpcEpochReader&) = delete;

  using EpochReader::Next;
  absl::Status Next(ReceivedElement* element, bool* end) override;
  std::string SavePosition() const override;
  EpochStats stats() const override;
  void SetDropObserver(std::function<void(const ReceivedElement&)> observer) override;

 private:
  struct Task {
    int64_t id = 0;
    // The dispatcher's view, refreshed by heartbeats.
    std::string address;
    std::string shm_nonce;  // of the worker at `address`
    int64_t generation = 0;
    // The dispatcher's grant to read the task at `generation` (sent with every GetElements).
    std::string capability;
    bool finished = false;
    int64_t num_elements = 0;
    // Elastic resume: where this consumer's part of the task starts (TaskInfo.start_index),
    // and which of its indices it reads when several consumers share it (TaskInfo.read_stride):
    // the others are fetched and passed over.
    int64_t start_index = 0;
    ReadStride stride;
    // Next index to fetch; only the task's fetch thread advances it.
    int64_t next_fetch = 0;
    // Next index to deliver: one past the last element Next() returned, and past the indices
    // after it that were passed over (not read by this consumer, see `stride`).
    int64_t next_deliver = 0;
    // How many elements this consumer has delivered of the task: its own indices in
    // [start_index, next_deliver).
    int64_t delivered() const { return stride.CountIn(start_index, next_deliver); }
    bool done = false;
    // Consecutive checksum mismatches at index checksum_index.
    int checksum_failures = 0;
    int64_t checksum_index = -1;
    // The last failure, for the Unavailable message of a stalled Next().
    std::string last_error;
    // A resumed reader under REMAINDER_PAD fetches this index (its position's last delivered
    // element of the task) again, to pad with: kept aside, never queued. -1: none.
    int64_t pad_seed_index = -1;
    // The calls in flight, so that the destructor can cancel them.
    grpc::ClientContext* call = nullptr;
    grpc::ClientContext* ahead_call = nullptr;
  };

  // A GetElements call: what was asked of which worker, and the answer. Made by the fetch
  // thread, or ahead on a thread of call_ahead_pool_ (MaybeCallAhead), which the Call waits for
  // when it goes.
  struct Call {
    GetElementsRequest request;
    std::string address;
    std::string shm_nonce;
    std::unique_ptr<grpc::ClientContext> context;
    // The transport the call went through (Connection::ElementChannelTo).
    std::shared_ptr<ElementChannel> channel;
    absl::Status rpc;
    ReceivedReply reply;
    bool made_ahead = false;  // on call_ahead_pool_, which notifies `answered` when it is
    absl::Notification answered;
    ~Call() {
      if (made_ahead) answered.WaitForNotification();
    }
  };

  struct Queued {
    int64_t task_id;
    int64_t index;
    int64_t bytes;
    bool shared_memory;
    // Made by running the trainer-side tail on what the worker sent.
    bool trainer_tail = false;
    ReceivedElement element;
  };

  // The outcome of one GetElements answer, checked outside the lock.
  struct Checked {
    std::vector<Queued> accepted;
    // The indices of the answer taken in order: the accepted ones and those passed over.
    int64_t taken = 0;
    // The first element passed over, when asked for (to pad with).
    std::optional<ReceivedElement> passed_over_sample;
    int64_t duplicates = 0;
    bool checksum_mismatch = false;
    // Set when the rest of the answer was dropped (protocol error or checksum mismatch).
    std::string problem;
    // Set for an answer that can never be right (unparsable payload behind a good checksum).
    absl::Status permanent;
  };

  GrpcEpochReader(std::shared_ptr<Connection> connection, int64_t job_id, int64_t epoch,
                  int32_t consumer, Compression compression,
                  std::shared_ptr<const ReaderLease> lease);

  // One ClientHeartbeat; on success updates the tasks, adding those the reader does not know
  // (a scaling step adds tasks to a running epoch) — with their fetch threads once fetching
  // has started — and whether the task set is final.
  // `final_report`: the one Next() sends at the epoch's end (1 s deadline, no waiting for a
  // dispatcher that is down).
  absl::Status Heartbeat(bool final_report = false);
  // Starts `task`'s fetch thread.
  void StartFetching(Task* task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `task` has delivered its last element; asks for a heartbeat at once if that leaves every
  // known task done while the task set may still grow.
  void MarkDone(Task* task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HeartbeatDue() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || heartbeat_wanted_;
  }
  void HeartbeatLoop();
  void FetchLoop(Task* task);
  // When `reply` (to `request`, from the worker at `address`) is large, the next call — from
  // where the task will stand once the reply's elements are accepted — is made now, on a thread
  // of call_ahead_pool_, so that the worker sends while this reader checks and copies (or maps)
  // the reply. Only within the call permits and the queue bound. If the reply then turns out not
  // to be accepted whole (a checksum mismatch), that call's answer is dropped and the task
  // asked again from where it stands: its from_index acknowledged elements the reader does not
  // have, which the worker recomputes (a request below its window restarts the task).
  std::unique_ptr<Call> MaybeCallAhead(Task* task, const GetElementsRequest& request,
                                       const std::string& address, const ReceivedReply& reply)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Checks an answer to GetElements(task_id, from_index) from the worker at `address` and makes
  // the accepted payloads elements, received through `channel` (the one that fetched it); the
  // indices `stride` does not read are checked and passed over (the first kept as
  // passed_over_sample with `want_sample`). With `tail` (the reply's trainer-side tail), each
  // element is made by running it on the payload. Needs no lock.
  static Checked CheckAnswer(int64_t task_id, int64_t from_index, const ReadStride& stride,
                             bool want_sample, const std::string& address,
                             const ReceivedReply& reply, ElementChannel& channel,
                             const TrainerTailRunner* tail);
  // The runner of the trainer-side tail `serialized` (a reply's TrainerTailDef), made once per
  // distinct tail. InvalidArgument for one that does not parse or that this client cannot run.
  absl::StatusOr<std::shared_ptr<const TrainerTailRunner>> TailRunner(const std::string& serialized)
      ABSL_LOCKS_EXCLUDED(tail_mu_);
  // Moves `task`'s next_deliver past the indices fetched and passed over right after it.
  static void PassOver(Task& task);
  // Waits until `condition` holds or the Env clock reaches `deadline_us`; whether it holds.
  bool AwaitUntil(const absl::Condition& condition, uint64_t deadline_us)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Every task of the final task set has delivered its last element.
  bool AllDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the equal-share gate says Next() is to do now.
  EqualShareGate::Action GateAction() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return gate_.Next(!queue_.empty(), AllDone());
  }
  // The gate holds Next() back for news of the other consumers (not for this reader's own
  // elements): heartbeats then come every kOthersPollMicros, not every interval.
  bool WaitingForOthers() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return GateAction() == EqualShareGate::Action::kWait && (!queue_.empty() || AllDone());
  }
  static constexpr uint64_t kOthersPollMicros = 20'000;
  // What Next() waits for: something the gate lets it do, or an error.
  bool ReadyToDeliver() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !error_.ok() || GateAction() != EqualShareGate::Action::kWait;
  }
  // Resumed under REMAINDER_PAD: picks the task whose last delivered element is fetched again
  // to pad with (Task::pad_seed_index).
  void SeedPadding() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pops the queue's front element, whose turn it is, for Next(): the history records it
  // (`outcome` "ok" when delivered, "dropped" when the remainder rule drops it) and its task's
  // position moves past it.
  Queued PopFront(const char* outcome) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string StallMessage() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetPermanentError(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Another reader took the consumer over (`status`, Aborted): Next() returns it at once.
  void Fence(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // No heartbeat is in flight and none completed for three intervals (the process was frozen):
  // Next() first waits for one to complete.
  bool HeartbeatOverdue() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<Connection> connection_;
  const ClientOptions& options_;
  const int64_t job_id_;
  const int64_t epoch_;
  const int32_t consumer_;
  const Compression compression_;
  const std::shared_ptr<const ReaderLease> lease_;
  const int64_t queue_bound_;

  absl::Mutex tail_mu_;
  std::map<std::string, std::shared_ptr<const TrainerTailRunner>> tail_runners_
      ABSL_GUARDED_BY(tail_mu_);
  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(tail_mu_);
  // Grows as heartbeats name new tasks; the Task objects never move.
  std::map<int64_t, std::unique_ptr<Task>> tasks_ ABSL_GUARDED_BY(mu_);
  // The dispatcher said no task will be added (ClientHeartbeatResponse.tasks_final).
  bool tasks_final_ ABSL_GUARDED_BY(mu_) = false;
  // Next() reported the end to the dispatcher (one final heartbeat).
  bool end_reported_ ABSL_GUARDED_BY(mu_) = false;
  // Start() has started the fetch threads: tasks found later start theirs at once.
  bool fetching_ ABSL_GUARDED_BY(mu_) = false;
  bool heartbeat_wanted_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // Tasks waiting for one of the max_outstanding_requests permits, in arrival order.
  std::deque<int64_t> permit_queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // A permanent error: Next() returns it once the queue is drained.
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  // This reader was taken over (Aborted): Next() returns it at once.
  absl::Status fenced_ ABSL_GUARDED_BY(mu_);
  // Heartbeats: when the last one completed (either way), and how many did.
  uint64_t heartbeat_completed_us_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t heartbeats_completed_ ABSL_GUARDED_BY(mu_) = 0;
  EpochStats stats_ ABSL_GUARDED_BY(mu_);
  // Equal shares: what the others are known to have, and this consumer's counts.
  EqualShareGate gate_ ABSL_GUARDED_BY(mu_);
  // The last element delivered, under REMAINDER_PAD (which pads with copies of it).
  std::optional<ReceivedElement> last_delivered_ ABSL_GUARDED_BY(mu_);
  // The first element passed over (another consumer's index of a shared task): what a consumer
  // that delivered none of its own pads with.
  std::optional<ReceivedElement> passed_over_sample_ ABSL_GUARDED_BY(mu_);
  std::function<void(const ReceivedElement&)> drop_observer_ ABSL_GUARDED_BY(mu_);
  // When a worker last answered a GetElements call (Env clock).
  uint64_t last_answer_us_ ABSL_GUARDED_BY(mu_) = 0;
  // The trainer's time per element, for the dispatcher's resource policies: in Next() waiting
  // for elements delivered (stats_.wait_us), and between Next() calls (its steps); when the
  // last one was handed out (0: none yet).
  uint64_t step_us_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_delivered_us_ ABSL_GUARDED_BY(mu_) = 0;
  std::string heartbeat_error_ ABSL_GUARDED_BY(mu_);
  grpc::ClientContext* heartbeat_call_ ABSL_GUARDED_BY(mu_) = nullptr;

  std::thread heartbeat_thread_;
  // Appended to by Start() and the heartbeat thread until stop_.
  std::vector<std::thread> fetch_threads_ ABSL_GUARDED_BY(mu_);
  // Where calls ahead run: max_outstanding_requests threads, as many as calls may be in flight,
  // so a call ahead never waits for a thread and none is started per call. Last: destroyed
  // after the fetch threads (whose Calls wait for their calls ahead) are joined.
  ThreadPool call_ahead_pool_;
};

}  // namespace granary

#endif  // GRANARY_CLIENT_EPOCH_READER_H_
