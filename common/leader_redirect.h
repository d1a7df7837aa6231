// How a dispatcher replica that does not lead tells its caller where the leader is (issue 32,
// docs/design.md "The replicated dispatcher"): it refuses the call with Unavailable — the code
// every dispatcher caller already retries — and names the leader's address both in the message
// and, for callers to act on, in the trailing metadata kLeaderMetadataKey. A replica that knows
// no leader (an election under way) refuses with Unavailable and no address: the caller tries
// the next address it was given.
//
// A refusing replica also says how far its state is (replica lag, `granary status`): the seq of
// the last journal record it applied, in the trailing metadata kAppliedSeqMetadataKey.
#ifndef GRANARY_COMMON_LEADER_REDIRECT_H_
#define GRANARY_COMMON_LEADER_REDIRECT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace granary {

// The trailing metadata key of a redirect; its value is the leader's host:port.
inline constexpr absl::string_view kLeaderMetadataKey = "granary-leader";

// Unavailable: "`why`; the leader is `leader_address`", carrying the address for
// RedirectedLeader (an empty address: no leader is known; the message says so).
absl::Status NotLeaderError(absl::string_view why, absl::string_view leader_address);

// The leader address a NotLeaderError carries, if `status` is one naming a leader.
std::optional<std::string> RedirectedLeader(const absl::Status& status);

// The trailing metadata key of a refusing replica's applied seq; its value is decimal.
inline constexpr absl::string_view kAppliedSeqMetadataKey = "granary-applied-seq";

// `status` (a NotLeaderError) carrying the refusing replica's last applied journal seq, for
// AppliedSeqOf.
absl::Status WithAppliedSeq(absl::Status status, uint64_t applied_seq);

// The applied seq `status` carries (WithAppliedSeq), if any.
std::optional<uint64_t> AppliedSeqOf(const absl::Status& status);

}  // namespace granary

#endif  // GRANARY_COMMON_LEADER_REDIRECT_H_
