#include "dispatcher/caller.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace granary {

absl::Status CheckJobAccess(const JobState& job, const Caller& caller) {
  if (!caller.authenticated || job.owner().empty() || job.owner() == caller.client) {
    return absl::OkStatus();
  }
  const auto& readers = job.options().readers();
  if (std::find(readers.begin(), readers.end(), caller.client) != readers.end()) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "job ", job.job_id(), job.name().empty() ? "" : absl::StrCat(" ('", job.name(), "')"),
      " belongs to client '", job.owner(), "', and client '", caller.client,
      "' is not among its readers"));
}

}  // namespace granary
