#include "common/leader_redirect.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace granary {
namespace {

// The absl::Status payload type URL under which the address travels inside the process.
constexpr absl::string_view kPayloadUrl = "type.granary/leader_address";

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

}  // namespace granary
