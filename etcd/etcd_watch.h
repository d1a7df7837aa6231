// EtcdWatch: follows every change to a range of etcd keys (a journal's prefix) from a start
// revision, on its own thread, across member failures.
//
// Protocol. The thread opens etcd's Watch stream on the client's current endpoint (with the
// "hasleader" metadata, so a member that loses its leader ends the stream instead of going
// silent) and creates one watch of [key, range_end) from next_revision(). Each WatchResponse's
// events — whole revisions, in revision order — go to `on_events`, and next_revision() becomes
// the last event's mod_revision + 1. When the stream fails (the member was killed, lost its
// leader, the connection broke) the thread moves to the client's next endpoint and creates the
// watch again from next_revision(), so across any number of failovers every event is delivered
// exactly once, in order. It pauses 50 ms before each new attempt.
//
// Ending. The watch ends, with `on_end` called once and status() set, when:
//   - OutOfRange: next_revision() has been compacted (on creation or on a resumption). The
//     message names the watched range, the revision asked for and etcd's compact revision (the
//     oldest revision still watchable); the caller reloads from a snapshot and watches again.
//     Unless started with OnCompacted::kResumeAtCompactRevision: then the watch goes on from the
//     compact revision (after an empty `on_events`), for callers that only need the state now.
//   - FailedPrecondition: etcd canceled the watch for another reason (its cancel_reason).
// It never ends because members are unreachable: it keeps trying every endpoint until
// destroyed (the caller decides how long a silent watch is acceptable, e.g. from a lease). A
// killed member breaks the stream at once; a member that hangs (SIGSTOP, a dead host) only when
// the channel's keepalive pings go unanswered (10 s + 5 s timeout, etcd_client.cc).
//
// Thread-safety: the methods are thread-safe. The callbacks run on the watch's thread, one at a
// time, never after the destructor returns; they must not destroy the EtcdWatch. The destructor
// cancels the stream and joins the thread.
#ifndef GRANARY_ETCD_ETCD_WATCH_H_
#define GRANARY_ETCD_ETCD_WATCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd/etcd_client.h"
#include "google/protobuf/repeated_field.h"
#include "proto/etcd_kv.pb.h"

namespace granary::etcd {

class EtcdWatch {
 public:
  // The events of one or more whole revisions, in revision order (events of one revision — a
  // Txn's writes — in the order the Txn made them).
  using EventsCallback =
      std::function<void(const google::protobuf::RepeatedPtrField<mvccpb::Event>& events)>;
  // Why the watch ended (see the file comment).
  using EndCallback = std::function<void(const absl::Status& status)>;

  // What a compacted resumption revision does (see the file comment's OutOfRange).
  enum class OnCompacted {
    // The watch ends with OutOfRange: a follower of every event must reload.
    kEnd,
    // The watch resumes at etcd's compact revision, first calling `on_events` with no events
    // ("changes may have been missed"): for a caller that re-reads the state on each call.
    kResumeAtCompactRevision,
  };

  // Starts watching [key, range_end) (range_end as in EtcdClient::Range; PrefixRangeEnd for a
  // prefix) from `start_revision`. `client` must outlive the watch. InvalidArgument when
  // start_revision < 1 (a resumable watch needs a definite start: a Range's header.revision + 1
  // for what follows a read) or a callback is empty.
  static absl::StatusOr<std::unique_ptr<EtcdWatch>> Start(EtcdClient* client, std::string key,
                                                          std::string range_end,
                                                          int64_t start_revision,
                                                          EventsCallback on_events,
                                                          EndCallback on_end,
                                                          OnCompacted on_compacted =
                                                              OnCompacted::kEnd);
  ~EtcdWatch();
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

  // The revision the next delivered event will have at least: start_revision, then the last
  // delivered event's mod_revision + 1.
  int64_t next_revision() const;
  // OK while the watch runs; why it ended once it has.
  absl::Status status() const;
  // Waits until a member has confirmed the watch (events from next_revision() on will come) or
  // the watch ended; DeadlineExceeded after `timeout`. Else status().
  absl::Status WaitUntilCreated(absl::Duration timeout) const;
  // How many times the stream was opened (1 + the failovers and reconnections so far).
  int streams_opened() const;

 private:
  EtcdWatch(EtcdClient* client, std::string key, std::string range_end, int64_t start_revision,
            EventsCallback on_events, EndCallback on_end, OnCompacted on_compacted);

  // The thread: streams until stopped or ended.
  void Run();
  // One stream on endpoint `index`: returns OK when the stream broke (try another endpoint),
  // the watch's end otherwise. Delivers the events it receives.
  absl::Status Stream(size_t index);
  // Handles one response of a stream: OK to go on; the watch's end otherwise.
  absl::Status Handle(const etcdserverpb::WatchResponse& response, const std::string& endpoint);
  std::string Describe(int64_t revision) const;

  EtcdClient* const client_;
  const std::string key_;
  const std::string range_end_;
  const EventsCallback on_events_;
  const EndCallback on_end_;
  const OnCompacted on_compacted_;

  mutable absl::Mutex mu_;
  int64_t next_revision_ ABSL_GUARDED_BY(mu_);
  bool created_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  int streams_opened_ ABSL_GUARDED_BY(mu_) = 0;
  // The open stream's context, for the destructor to cancel.
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread thread_;
};

}  // namespace granary::etcd

#endif  // GRANARY_ETCD_ETCD_WATCH_H_
