#include "pipeline/core/split_provider.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace granary {

absl::Status PlannedSplitProvider::GetNext(Split* split, bool* end) {
  *end = next_ >= splits_.size();
  if (!*end) *split = splits_[next_++];
  return absl::OkStatus();
}

absl::Status PlannedSplitProvider::Save(StateWriter& writer) {
  writer.WriteInt("next", static_cast<int64_t>(next_));
  return absl::OkStatus();
}

absl::Status PlannedSplitProvider::Restore(const StateReader& reader) {
  ASSIGN_OR_RETURN(int64_t next, reader.ReadInt("next"));
  if (next < 0 || static_cast<size_t>(next) > splits_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("saved split cursor ", next,
                                                   " is outside the plan of ", splits_.size(),
                                                   " splits"));
  }
  next_ = static_cast<size_t>(next);
  return absl::OkStatus();
}

}  // namespace granary
