#include "dispatcher/request_limits.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace granary {
namespace {

absl::Status OutOfBounds(absl::string_view field, int64_t value, int64_t low, int64_t high) {
  return absl::InvalidArgumentError(absl::StrCat("job option ", field, " is ", value,
                                                 "; it must be between ", low, " and ", high));
}

}  // namespace

absl::Status ValidateJobOptions(const JobOptions& options) {
  if (options.num_consumers() < 0 || options.num_consumers() > kMaxConsumers) {
    return OutOfBounds("num_consumers", options.num_consumers(), 0, kMaxConsumers);
  }
  if (options.num_worker_slots() < 0 || options.num_worker_slots() > kMaxWorkerSlots) {
    return OutOfBounds("num_worker_slots", options.num_worker_slots(), 0, kMaxWorkerSlots);
  }
  if (options.num_local_slots() < 0 || options.num_local_slots() > kMaxWorkerSlots) {
    return OutOfBounds("num_local_slots", options.num_local_slots(), 0, kMaxWorkerSlots);
  }
  const int64_t tasks =
      static_cast<int64_t>(std::max(options.num_consumers(), 1)) *
      (std::max(options.num_worker_slots(), 1) + int64_t{options.num_local_slots()});
  if (tasks > kMaxTasksPerEpoch) {
    return absl::InvalidArgumentError(
        absl::StrCat("job options num_consumers ", options.num_consumers(), " x (num_worker_slots ",
                     options.num_worker_slots(), " + num_local_slots ", options.num_local_slots(),
                     ") = ", tasks, " tasks per epoch; the limit is ", kMaxTasksPerEpoch));
  }
  if (!Placement_IsValid(options.placement())) {
    return absl::InvalidArgumentError(absl::StrCat("job option placement ", options.placement(),
                                                   " is none of the known policies"));
  }
  if (options.placement() != PLACEMENT_STATIC && options.autoscale() != AUTOSCALE_NONE) {
    return absl::InvalidArgumentError(
        "job options autoscale and placement both set the job's workers: choose one");
  }
  if (!Autoscale_IsValid(options.autoscale())) {
    return absl::InvalidArgumentError(absl::StrCat("job option autoscale ", options.autoscale(),
                                                   " is none of the known policies"));
  }
  if (!Sharding_IsValid(options.sharding())) {
    return absl::InvalidArgumentError(
        absl::StrCat("job option sharding ", options.sharding(), " is none of the known ways"));
  }
  if (!Remainder_IsValid(options.remainder())) {
    return absl::InvalidArgumentError(
        absl::StrCat("job option remainder ", options.remainder(), " is none of the known rules"));
  }
  if (!Tail_IsValid(options.tail())) {
    return absl::InvalidArgumentError(
        absl::StrCat("job option tail ", options.tail(), " is none of auto, worker, client"));
  }
  if (options.num_epochs() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job option num_epochs is ", options.num_epochs(), "; it must be >= 0"));
  }
  if (options.readers_size() > kMaxJobReaders) {
    return OutOfBounds("readers", options.readers_size(), 0, kMaxJobReaders);
  }
  for (const std::string& reader : options.readers()) {
    RETURN_IF_ERROR(ValidateName("job reader", reader));
  }
  if (!CachePolicy_IsValid(options.cache_policy())) {
    return absl::InvalidArgumentError(
        absl::StrCat("job option cache_policy ", options.cache_policy(), " is not a policy"));
  }
  return absl::OkStatus();
}

absl::Status ValidateScaling(int64_t job_id, int64_t remote, int64_t local, int32_t consumers) {
  const int64_t max_slots = MaxWorkerSlots(consumers);
  if (remote < 0 || local < 0 || remote + local < 1 || remote + local > max_slots) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job ", job_id, ": ", remote, " remote + ", local,
        " local tasks per consumer; each must be >= 0 and together in [1, ", max_slots, "]"));
  }
  return absl::OkStatus();
}

absl::Status ValidateName(absl::string_view what, absl::string_view value) {
  if (static_cast<int64_t>(value.size()) > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", value.size(), " bytes; the limit is ", kMaxNameBytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateShmNonce(absl::string_view nonce) {
  const bool hex = std::all_of(nonce.begin(), nonce.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
  if (!hex || static_cast<int64_t>(nonce.size()) > kMaxShmNonceChars) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared-memory nonce '", absl::CHexEscape(nonce.substr(0, 64)), "' is not ",
                     "up to ", kMaxShmNonceChars, " lowercase hex digits"));
  }
  return absl::OkStatus();
}

}  // namespace granary
