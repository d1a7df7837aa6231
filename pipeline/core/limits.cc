#include "pipeline/core/limits.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace granary {

absl::Status CheckParamLimit(const Params& params, absl::string_view name, int64_t value,
                             int64_t limit, absl::string_view limit_name) {
  if (value <= limit) return absl::OkStatus();
  return params.Invalid(name, absl::StrCat("is ", value, ", above the limit ", limit, " (",
                                           limit_name, ", pipeline/core/limits.h)"));
}

std::string HumanBytes(double bytes) {
  constexpr double kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
  if (bytes >= kGiB) return absl::StrFormat("%.4g GiB", bytes / kGiB);
  if (bytes >= kMiB) return absl::StrFormat("%.4g MiB", bytes / kMiB);
  if (bytes >= kKiB) return absl::StrFormat("%.4g KiB", bytes / kKiB);
  return absl::StrFormat("%.0f bytes", bytes);
}

}  // namespace granary
