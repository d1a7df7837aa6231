// Status propagation macros for absl::Status / absl::StatusOr (this Abseil release has none).
//
//   RETURN_IF_ERROR(DoThing());                 // returns the Status if not OK
//   ASSIGN_OR_RETURN(auto file, env->Open(p));  // unwraps a StatusOr or returns its Status
#ifndef GRANARY_COMMON_STATUS_MACROS_H_
#define GRANARY_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#define GRANARY_STATUS_CONCAT_INNER_(x, y) x##y
#define GRANARY_STATUS_CONCAT_(x, y) GRANARY_STATUS_CONCAT_INNER_(x, y)

#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    const ::absl::Status granary_status_ = (expr);   \
    if (!granary_status_.ok()) return granary_status_; \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, rexpr) \
  GRANARY_ASSIGN_OR_RETURN_IMPL_(GRANARY_STATUS_CONCAT_(granary_statusor_, __LINE__), lhs, rexpr)

#define GRANARY_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();   \
  lhs = std::move(statusor).value()

namespace granary {

// Returns `status` with `context + ": "` prepended to its message, keeping its code.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace granary

#endif  // GRANARY_COMMON_STATUS_MACROS_H_
