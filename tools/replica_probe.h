// What `granary status` says of a replicated dispatcher's replicas (issue 32): each address it
// was given is asked GetStatus with a short deadline. The leader answers; a follower refuses with
// Unavailable naming the leader (common/leader_redirect.h); a replica that is dead, or is up but
// knows no leader (an election under way), answers no status — its error says which. Each
// answer says how far the replica's state is (the seq of the last journal record it applied:
// the leader's state, a follower's refusal, common/leader_redirect.h), and each follower's lag
// is the leader's applied seq minus its own.
#ifndef GRANARY_TOOLS_REPLICA_PROBE_H_
#define GRANARY_TOOLS_REPLICA_PROBE_H_

#include <cstdint>
#include <memory>
#include <optional>
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
  // The seq of the last journal record the replica applied, when it said.
  std::optional<uint64_t> applied_seq;
  // Of the leader (0) and of each follower that said its applied seq, when the leader answered
  // too: the records the leader applied that it has not (0 when it is ahead: the probes are
  // not simultaneous).
  std::optional<uint64_t> lag_records;
};

// Asks each of `addresses` GetStatus (summary only) with `deadline` each, concurrently, in
// `credentials`; one probe per address, in order, with the lags.
std::vector<ReplicaProbe> ProbeReplicas(
    const std::vector<std::string>& addresses,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials, absl::Duration deadline);

// The text lines of the probes: "replicas (N):" then "  ADDRESS  leader", "  ADDRESS  follower
// (leader L)" or "  ADDRESS  not serving: ERROR", each followed by ", applied seq S" and
// ", lag R records" when known and ending in a newline.
std::string ReplicasText(const std::vector<ReplicaProbe>& probes);

// The probes as JSON values: a list of objects {"address", "role": "leader" | "follower" |
// "not_serving", "leader" (of a follower), "error" (of a replica not serving), "applied_seq"
// and "lag_records" (numbers, when known)}.
google::protobuf::Value ReplicasJson(const std::vector<ReplicaProbe>& probes);

}  // namespace granary

#endif  // GRANARY_TOOLS_REPLICA_PROBE_H_
