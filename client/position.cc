#include "client/position.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/deterministic_serialization.h"
#include "common/status_macros.h"

namespace granary {
namespace {

constexpr char kMagic[] = "GPOS1";
constexpr size_t kMagicSize = sizeof(kMagic) - 1;

}  // namespace

std::string EncodePosition(const ClientPosition& position) {
  return absl::StrCat(kMagic, SerializeDeterministically(position));
}

absl::StatusOr<ClientPosition> ParsePosition(const std::string& blob) {
  ClientPosition position;
  if (!absl::StartsWith(blob, kMagic) ||
      !position.ParseFromArray(blob.data() + kMagicSize,
                               static_cast<int>(blob.size() - kMagicSize))) {
    return absl::InvalidArgumentError(
        absl::StrCat("position is malformed (", blob.size(),
                     " bytes; expected the output of EpochReader::SavePosition)"));
  }
  for (const auto& [task, index] : position.next_index()) {
    if (index < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("position: task ", task, " has a negative next index ", index));
    }
  }
  return position;
}

absl::StatusOr<ClientPosition> DecodePosition(const std::string& blob, int64_t job_id,
                                              int64_t epoch, int32_t consumer) {
  ASSIGN_OR_RETURN(ClientPosition position, ParsePosition(blob));
  std::vector<std::string> mismatches;
  if (position.job_id() != job_id) {
    mismatches.push_back(absl::StrCat("its job is ", position.job_id(), ", not ", job_id));
  }
  if (position.epoch() != epoch) {
    mismatches.push_back(absl::StrCat("its epoch is ", position.epoch(), ", not ", epoch));
  }
  if (position.consumer() != consumer) {
    mismatches.push_back(absl::StrCat("its consumer is ", position.consumer(), ", not ", consumer));
  }
  if (!mismatches.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("position does not match this reader: ", absl::StrJoin(mismatches, "; ")));
  }
  return position;
}

}  // namespace granary
