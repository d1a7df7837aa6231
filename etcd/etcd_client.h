// EtcdClient: Granary's client of etcd v3's gRPC API (proto/etcd_rpc.proto), for the replicated
// dispatcher's journal (issue 32). Debian has no etcd C++ client, so this speaks etcd's KV,
// Lease and Maintenance services directly; EtcdWatch (etcd_watch.h) and LeaseKeepAlive
// (lease_keep_alive.h) build on it for the streaming services.
//
// Endpoints and failover. The client holds one gRPC channel per endpoint ("host:port") and sends
// each call to its current endpoint. A call that fails there because the endpoint is unreachable
// (UNAVAILABLE, DEADLINE_EXCEEDED) or has no raft leader moves the current endpoint to the next
// one, and — only when the call is safe to repeat — is retried there, each endpoint at most once
// per call. Every call carries etcd's "hasleader" metadata, so a member cut off from its
// cluster's leader refuses at once ("etcdserver: no leader", before applying anything) instead
// of serving stale reads or timing out.
//
// Which calls are retried on another endpoint:
//   - Range, LeaseTimeToLive: always (reads). Status(endpoint) asks that one member only.
//   - Put, DeleteRange, Txn, Compact, LeaseGrant, LeaseRevoke (writes): only when the request
//     provably never reached a server that could apply it — the channel could not connect
//     within the call's deadline, or the member answered "etcdserver: no leader" (refused before
//     applying). Once a write was sent, a broken connection or an expired deadline leaves its
//     outcome unknown and the write is NOT repeated.
//
// Error codes (every message starts "etcd <endpoints tried>: <method>: ", the endpoints joined by
// commas, so an operator sees which members were asked):
//   - Unavailable: the call was not applied — no endpoint was reachable within its deadline, or
//     none had a leader. Safe to retry later, for writes too. Over TLS, an endpoint whose
//     certificate this client does not trust, or that refuses the client's certificate (or its
//     lack of one), is unreachable too; its failure then says "TLS" and which certificate to
//     check.
//   - Unknown: a write MAY have been applied: it was sent, and then the connection broke, its
//     deadline passed, or etcd answered "request timed out" / "leader changed" / "server
//     stopped" (etcd itself cannot tell). The caller must read back to learn the outcome; the
//     journal treats such an append as indeterminate.
//   - What etcd (or gRPC) itself answers, with its message: InvalidArgument ("etcdserver:
//     request is too large": a request above the server's --max-request-bytes, 1.5 MiB by
//     default); ResourceExhausted ("grpc: received message larger than max": a request above
//     that limit + 512 KiB, or a response above options.max_response_bytes; "etcdserver: mvcc:
//     database space exceeded" past --quota-backend-bytes); OutOfRange (a compacted or future
//     revision); NotFound (an unknown lease); FailedPrecondition; PermissionDenied.
//   - A Txn whose compares fail is NOT an error: the call succeeds with succeeded == false and
//     the failure branch's responses.
//
// Thread-safe: any number of threads may call at once (gRPC channels are shared; the channels
// and the current endpoint are guarded by a mutex).
#ifndef GRANARY_ETCD_ETCD_CLIENT_H_
#define GRANARY_ETCD_ETCD_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/etcd_rpc.grpc.pb.h"
#include "security/transport_security.h"

namespace granary::etcd {

struct EtcdClientOptions {
  // "host:port" of each member's client URL; at least one, none empty.
  std::vector<std::string> endpoints;
  // How the channels are secured: TLS (ca_file; cert_file and key_file for a client certificate)
  // or, asked for explicitly, plain text (insecure). Its names say how the caller's settings are
  // called in errors.
  TransportSecurity security;
  // The deadline of each attempt on one endpoint (a call may make one attempt per endpoint, so
  // a call returns within endpoints.size() × call_timeout). Positive.
  absl::Duration call_timeout = absl::Seconds(5);
  // The largest response the client accepts (a Range of many large values); larger ones fail
  // with ResourceExhausted. Positive.
  int max_response_bytes = 64 << 20;
};

// Builders of Txn compares and operations (thin wrappers over the protos).
namespace txn {
// key's create_revision `result` `revision` (0: the key does not exist).
etcdserverpb::Compare CreateRevision(const std::string& key,
                                     etcdserverpb::Compare::CompareResult result, int64_t revision);
// key's mod_revision `result` `revision`.
etcdserverpb::Compare ModRevision(const std::string& key,
                                  etcdserverpb::Compare::CompareResult result, int64_t revision);
// key's version `result` `version` (0: the key does not exist).
etcdserverpb::Compare Version(const std::string& key, etcdserverpb::Compare::CompareResult result,
                              int64_t version);
// key's value `result` `value` (a missing key compares false for every result).
etcdserverpb::Compare Value(const std::string& key, etcdserverpb::Compare::CompareResult result,
                            const std::string& value);
etcdserverpb::RequestOp PutOp(const std::string& key, const std::string& value, int64_t lease = 0);
// range_end as in EtcdClient::Range.
etcdserverpb::RequestOp RangeOp(const std::string& key, const std::string& range_end = "");
etcdserverpb::RequestOp DeleteOp(const std::string& key, const std::string& range_end = "");
}  // namespace txn

// The range_end that makes a Range, DeleteRange or watch cover every key starting with
// `prefix` ("\0" — every key — for an empty prefix).
std::string PrefixRangeEnd(const std::string& prefix);

class EtcdClient {
 public:
  // InvalidArgument naming the option (endpoints, call_timeout, max_response_bytes) when
  // options are malformed; the errors of ChannelCredentialsFor for the security settings.
  // Connects lazily: an unreachable cluster shows on the first call.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(EtcdClientOptions options);

  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  const std::vector<std::string>& endpoints() const { return options_.endpoints; }
  absl::Duration call_timeout() const { return options_.call_timeout; }

  // The keys in [key, range_end) (range_end "": `key` alone; PrefixRangeEnd(p): the prefix p)
  // as of `revision` (0: the newest), at most `limit` (0: all; `more` says whether some were
  // left out), linearizable. Retried on another endpoint. OutOfRange: `revision` is compacted.
  absl::StatusOr<etcdserverpb::RangeResponse> Range(const std::string& key,
                                                    const std::string& range_end = "",
                                                    int64_t revision = 0, int64_t limit = 0);
  // A full RangeRequest (sorting, keys_only, count_only, serializable). Retried.
  absl::StatusOr<etcdserverpb::RangeResponse> Range(const etcdserverpb::RangeRequest& request);
  // Sets key to value, attached to `lease` (0: none). A write (see the file comment).
  absl::StatusOr<etcdserverpb::PutResponse> Put(const std::string& key, const std::string& value,
                                                int64_t lease = 0);
  // Deletes the keys in [key, range_end). A write.
  absl::StatusOr<etcdserverpb::DeleteRangeResponse> DeleteRange(const std::string& key,
                                                                const std::string& range_end = "");
  // Applies `request` atomically: its success ops when every compare holds, else its failure
  // ops (succeeded says which). A write.
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& request);
  // Discards the history before `revision`; `physical`: returns once the backend has freed it.
  // A write. OutOfRange: `revision` is already compacted, or is in the future.
  absl::StatusOr<etcdserverpb::CompactionResponse> Compact(int64_t revision, bool physical);
  // A lease of `ttl_seconds` (etcd raises it to its minimum TTL, about 1.5 election timeouts).
  // A write (a lease granted by an attempt whose outcome is unknown simply expires).
  absl::StatusOr<etcdserverpb::LeaseGrantResponse> LeaseGrant(int64_t ttl_seconds);
  // Revokes lease `id`, deleting every key attached to it. A write. NotFound: no such lease.
  absl::StatusOr<etcdserverpb::LeaseRevokeResponse> LeaseRevoke(int64_t id);
  // Lease `id`'s remaining TTL (TTL -1: it does not exist), with its keys when `keys`. Retried.
  absl::StatusOr<etcdserverpb::LeaseTimeToLiveResponse> LeaseTimeToLive(int64_t id,
                                                                        bool keys = false);
  // The status of the member at `endpoint` (one of endpoints()): its version, db size, the
  // raft leader's member ID, raft index and term. Not redirected elsewhere (the answer is about
  // that member); InvalidArgument when `endpoint` is not one of endpoints().
  absl::StatusOr<etcdserverpb::StatusResponse> Status(const std::string& endpoint);

  // For the streaming classes (EtcdWatch, LeaseKeepAlive). The index of the endpoint calls go to
  // now, and the channel to endpoint `index`.
  size_t current_endpoint() const;
  std::shared_ptr<grpc::Channel> channel(size_t index) const;
  // After a failure on endpoint `failed`: moves the current endpoint past it (when it still is
  // the current one) and returns the new current endpoint. A channel in transient failure is
  // replaced by a fresh one: gRPC 1.51's channel otherwise goes on failing with its stale error
  // ("Connection refused") for up to ~20 s after the member is back.
  size_t FailedOver(size_t failed);
  // Prepares `context` for a call or stream: `deadline` (InfiniteFuture: none) and etcd's
  // "hasleader" metadata.
  static void PrepareContext(grpc::ClientContext* context, absl::Time deadline);

 private:
  EtcdClient(EtcdClientOptions options, std::shared_ptr<grpc::ChannelCredentials> credentials);
  // Replaces endpoint `index`'s channel by a fresh one when it is in transient failure.
  void RenewIfFailed(size_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  enum class Retry { kAlways, kIfNotSent };
  // Calls `rpc` with `request` on the current endpoint, failing over as the file comment says;
  // `method` names the call in errors.
  template <typename Stub, typename Request, typename Response>
  absl::StatusOr<Response> Call(const char* method, Retry retry,
                                grpc::Status (Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                          Response*),
                                const Request& request);

  const EtcdClientOptions options_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  const grpc::ChannelArguments arguments_;
  mutable absl::Mutex mu_;
  // One per endpoint.
  std::vector<std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace granary::etcd

#endif  // GRANARY_ETCD_ETCD_CLIENT_H_
