// What `granary status` says of a replicated dispatcher's replicas (issue 32): each address it
// was given is asked GetStatus with a short deadline. The leader answers; a follower refuses with
// Unavailable naming the leader (common/leader_redirect.h); a replica that is dead, or is up but
// knows no leader (an election under way), answers no status — its error says which.
#ifndef GRANARY_TOOLS_REPLICA_PROBE_H_
#define GRANARY_TOOLS_REPLICA_PROBE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "google/protobuf/struct.pb.h"
#include "grpcpp/security/credentials.h"

namespace granary {

struct ReplicaProbe {
  enum class Role { kLeader, kFollower, kNotServing };
  std::string address;
  Role role = Role::kNotServing;
  // Of a follower: the leader's address it names.
  std::string leader;
  // Of a replica not serving: the call's error ("failed to connect ..." for a dead one).
  std::string error;
};

// Asks each of `addresses` GetStatus (summary only) with `deadline` each, concurrently, in
// `credentials`; one probe per address, in order.
std::vector<ReplicaProbe> ProbeReplicas(
    const std::vector<std::string>& addresses,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials, absl::Duration deadline);

// The text lines of the probes: "replicas (N):" then "  ADDRESS  leader", "  ADDRESS  follower
// (leader L)" or "  ADDRESS  not serving: ERROR", each ending in a newline.
std::string ReplicasText(const std::vector<ReplicaProbe>& probes);

// The probes as JSON values: a list of objects {"address", "role": "leader" | "follower" |
// "not_serving", "leader" (of a follower), "error" (of a replica not serving)}.
google::protobuf::Value ReplicasJson(const std::vector<ReplicaProbe>& probes);

}  // namespace granary

#endif  // GRANARY_TOOLS_REPLICA_PROBE_H_
