// Caller: who made a request to the dispatcher, as its gRPC face established it from the peer's
// certificate or bearer token (security/peer_identity.h; DESIGN.md §1: no gRPC here), and what
// a client may do with a job (SECURITY.md).
#ifndef GRANARY_DISPATCHER_CALLER_H_
#define GRANARY_DISPATCHER_CALLER_H_

#include <string>

#include "absl/status/status.h"
#include "proto/dispatcher_state.pb.h"

namespace granary {

struct Caller {
  // With `authenticated`, `client` names the calling client and job access is checked; without
  // (plain text, in-process use), every caller may do everything and creates unowned jobs.
  bool authenticated = false;
  std::string client;
  // An operator (`granary dispatcher --admin_clients`): sees the whole status.
  bool admin = false;

  // The owner a job created by this caller gets ("" when not authenticated).
  std::string owner() const { return authenticated ? client : ""; }
};

// OK when `caller` may open, read, start epochs of and heartbeat for `job`: it is not
// authenticated, or the job has no owner, or the caller is its owner or among its readers.
// PermissionDenied naming the job, its owner and the caller otherwise.
absl::Status CheckJobAccess(const JobState& job, const Caller& caller);

// What of `state` `caller` may see in GetStatus: the jobs CheckJobAccess lets it access, with
// their epochs, tasks and datasets, the caches those jobs wrote, and every worker (clients dial
// them anyway). All of it for an unauthenticated caller or an admin.
DispatcherStateProto VisibleState(const DispatcherStateProto& state, const Caller& caller);

}  // namespace granary

#endif  // GRANARY_DISPATCHER_CALLER_H_
