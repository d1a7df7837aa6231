// DispatcherTargets: the dispatcher a caller (the client library, a worker) talks to, among the
// addresses it was given — one address for a single dispatcher; the replicas' addresses (or a
// DNS name standing for them) for a replicated one (issue 32).
//
// Calls go to the current target. A replica that does not lead refuses a call with Unavailable
// and the leader's address as trailing metadata (common/leader_redirect.h): AfterFailure then
// makes that address current (creating its channel if it was not among the given ones) and says
// to retry at once. An Unavailable without a redirect (a dead or restarting replica, an election
// under way), or a DeadlineExceeded (a call waiting for a dead replica to be ready), moves to the
// next given address, and the caller backs off as for any Unavailable.
// Every dispatcher RPC is idempotent or answered from journaled state, so a call retried on the
// new leader is never decided twice.
//
// Thread-safe. Stubs live as long as the DispatcherTargets.
#ifndef GRANARY_COMMON_DISPATCHER_TARGETS_H_
#define GRANARY_COMMON_DISPATCHER_TARGETS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "proto/dispatcher.grpc.pb.h"

namespace granary {

class DispatcherTargets {
 public:
  // `addresses`: "host:port[,host:port...]". InvalidArgument naming `flag` (how the caller
  // calls the setting, e.g. "--dispatcher") when it is empty or holds an empty address.
  static absl::StatusOr<std::unique_ptr<DispatcherTargets>> Create(
      absl::string_view addresses, absl::string_view flag,
      std::shared_ptr<grpc::ChannelCredentials> credentials, grpc::ChannelArguments arguments);

  // Where a call goes now.
  struct Target {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    Dispatcher::Stub* stub = nullptr;
  };
  Target Current() const ABSL_LOCKS_EXCLUDED(mu_);

  // After a call to `called` (Current().address when it was made) failed with `status`, whose
  // trailing metadata is in `context`: moves on as the file comment says. Returns whether to
  // retry at once (a redirect to another address). A failure reported for a target that is no
  // longer current (another call moved on first) changes nothing.
  bool AfterFailure(const std::string& called, const grpc::ClientContext& context,
                    const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  // Moves past `called` (Current().address when it was tried) to the next given address, unless
  // another caller moved on first: for a caller that found it unreachable without a call.
  void MoveOn(const std::string& called) ABSL_LOCKS_EXCLUDED(mu_);

  // Calls `rpc` on the current target, with a fresh context from `make_context` per attempt,
  // following redirects at once and moving past an Unavailable target — trying each given
  // address and each redirect at most once — and returns the last attempt's status. No backoff:
  // for callers that retry themselves (with a backoff) or fail fast.
  using Rpc = std::function<grpc::Status(Dispatcher::Stub& stub, grpc::ClientContext* context)>;
  grpc::Status Call(const std::function<std::unique_ptr<grpc::ClientContext>()>& make_context,
                    const Rpc& rpc) ABSL_LOCKS_EXCLUDED(mu_);

  // The addresses given, in order.
  const std::vector<std::string>& addresses() const { return addresses_; }

 private:
  DispatcherTargets(std::vector<std::string> addresses,
                    std::shared_ptr<grpc::ChannelCredentials> credentials,
                    grpc::ChannelArguments arguments);
  // Makes the next given address current.
  void MoveOnLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The target at `address`, made on first use.
  Target TargetAt(const std::string& address) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<std::string> addresses_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  const grpc::ChannelArguments arguments_;

  mutable absl::Mutex mu_;
  struct Made {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<Dispatcher::Stub> stub;
  };
  // Channels are made on first use, by const calls too.
  mutable std::map<std::string, Made> made_ ABSL_GUARDED_BY(mu_);
  std::string current_ ABSL_GUARDED_BY(mu_);
  // The index in addresses_ of the last given address made current.
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
};

// The value of the server's trailing metadata `key` of a finished call; empty when it sent none.
std::string TrailingMetadataOf(const grpc::ClientContext& context, absl::string_view key);

// The leader address the trailing metadata of a call refused by a follower names
// (kLeaderMetadataKey, common/leader_redirect.h); empty when it names none.
std::string RedirectedLeaderOf(const grpc::ClientContext& context);

}  // namespace granary

#endif  // GRANARY_COMMON_DISPATCHER_TARGETS_H_
