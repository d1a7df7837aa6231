// LeaseKeepAlive: keeps an etcd lease alive from its own thread (the leader's lease of the
// replicated dispatcher), and says when it is lost.
//
// Protocol. Every ttl/3 the thread sends one LeaseKeepAlive request for the lease on a fresh
// stream to the client's current endpoint, with the client's call deadline and "hasleader"
// metadata; a failure there moves it to the next endpoint at once (a keep-alive is idempotent).
// Each answer with a positive TTL extends the lease's validity to the time the request was SENT
// plus that TTL: a conservative local bound, since etcd counts the TTL from when it received the
// request. Validity is measured on the Env's clock (steady: PosixEnv's never steps), never on the
// wall clock: a wall-clock step backward must not make an expired lease look valid, nor a step
// forward lose it early. The lease is lost — for good: the class never revives it — when
//   - etcd answers TTL <= 0 (the lease expired or was revoked): NotFound; or
//   - its validity runs out without a successful refresh (no member reachable long enough):
//     DeadlineExceeded, naming the endpoints and the last failure.
// Then `on_lost` runs once (on the thread) and the thread ends. A holder of leadership must stop
// acting as leader before valid_for() runs out, whatever it has heard: etcd may expire the lease
// then.
//
// Thread-safety: the methods are thread-safe. `on_lost` must not destroy the LeaseKeepAlive.
// The destructor stops refreshing (it does NOT revoke the lease, which then expires unless
// revoked by the caller) and joins the thread.
#ifndef GRANARY_ETCD_LEASE_KEEP_ALIVE_H_
#define GRANARY_ETCD_LEASE_KEEP_ALIVE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "etcd/etcd_client.h"

namespace granary::etcd {

class LeaseKeepAlive {
 public:
  using LostCallback = std::function<void(const absl::Status& why)>;

  // Refreshes lease `id` once (so valid_for() is positive and the lease known to exist), then keeps
  // it alive as the file comment says. `ttl_seconds` is the lease's granted TTL
  // (LeaseGrantResponse::ttl). `client` and `clock` (whose NowMicros measures the validity)
  // must outlive this. InvalidArgument for ttl_seconds < 1 or an empty callback; NotFound when
  // the lease does not exist; the client's errors when no member could refresh it.
  static absl::StatusOr<std::unique_ptr<LeaseKeepAlive>> Start(EtcdClient* client, int64_t id,
                                                               int64_t ttl_seconds,
                                                               LostCallback on_lost,
                                                               Env* clock = Env::Default());
  ~LeaseKeepAlive();
  LeaseKeepAlive(const LeaseKeepAlive&) = delete;
  LeaseKeepAlive& operator=(const LeaseKeepAlive&) = delete;

  int64_t lease_id() const { return id_; }
  // Whether the lease is still kept alive (not lost).
  bool alive() const;
  // OK while alive; why it was lost (NotFound, DeadlineExceeded) after.
  absl::Status status() const;
  // How much longer the lease surely exists, by the Env's clock (zero once that is past): see
  // the file comment.
  absl::Duration valid_for() const;
  // How many refreshes succeeded (the first, in Start, included).
  int64_t refreshes() const;

 private:
  LeaseKeepAlive(EtcdClient* client, int64_t id, int64_t ttl_seconds, LostCallback on_lost,
                 Env* clock);

  // One keep-alive round trip to endpoint `index`: the TTL etcd answered (<= 0: the lease is
  // gone), or the failure.
  absl::StatusOr<int64_t> RefreshOn(size_t index);
  // Refreshes on the current endpoint, failing over through every endpoint once: OK (and
  // its validity extended), NotFound when the lease is gone, else the failures.
  absl::Status Refresh();
  void Run();

  EtcdClient* const client_;
  const int64_t id_;
  const absl::Duration interval_;
  const LostCallback on_lost_;
  Env* const clock_;

  mutable absl::Mutex mu_;
  // On clock_'s NowMicros.
  uint64_t valid_until_micros_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  int64_t refreshes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The refresh in flight's context, for the destructor to cancel.
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread thread_;
};

}  // namespace granary::etcd

#endif  // GRANARY_ETCD_LEASE_KEEP_ALIVE_H_
