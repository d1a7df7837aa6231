#include "common/leader_redirect.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace granary {
namespace {

// The absl::Status payload type URL under which the address travels inside the process.
constexpr absl::string_view kPayloadUrl = "type.granary/leader_address";
// The payload type URL of the refusing replica's applied seq (decimal).
constexpr absl::string_view kAppliedSeqPayloadUrl = "type.granary/applied_seq";

}  // namespace

absl::Status NotLeaderError(absl::string_view why, absl::string_view leader_address) {
  if (leader_address.empty()) {
    return absl::UnavailableError(absl::StrCat(why, "; no leader is elected yet (retry)"));
  }
  absl::Status status =
      absl::UnavailableError(absl::StrCat(why, "; the leader is ", leader_address));
  status.SetPayload(kPayloadUrl, absl::Cord(leader_address));
  return status;
}

std::optional<std::string> RedirectedLeader(const absl::Status& status) {
  const auto address = status.GetPayload(kPayloadUrl);
  if (!address.has_value()) return std::nullopt;
  return std::string(*address);
}

absl::Status WithAppliedSeq(absl::Status status, uint64_t applied_seq) {
  status.SetPayload(kAppliedSeqPayloadUrl, absl::Cord(absl::StrCat(applied_seq)));
  return status;
}

std::optional<uint64_t> AppliedSeqOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kAppliedSeqPayloadUrl);
  uint64_t seq = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &seq)) return std::nullopt;
  return seq;
}

}  // namespace granary
