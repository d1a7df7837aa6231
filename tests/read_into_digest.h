// How a process test plays a trainer: reads a served epoch into an EpochDigest (compared with
// DigestInProcess, in_process_digest.h), a simulated training step per element so that the
// epoch lasts while the test kills and restarts processes.
#ifndef GRANARY_TESTS_READ_INTO_DIGEST_H_
#define GRANARY_TESTS_READ_INTO_DIGEST_H_

#include <chrono>
#include <cstdint>

#include "absl/status/statusor.h"
#include "granary/client.h"
#include "pipeline/digests/epoch_digest.h"

namespace granary::testing {

// Reads up to `n` elements (all the epoch's when n < 0) of `reader` into `digest`, sleeping
// `step` before each. Returns whether the epoch ended; the reader's error if Next fails.
absl::StatusOr<bool> ReadIntoDigest(EpochReader& reader, int64_t n, EpochDigest& digest,
                                    std::chrono::milliseconds step = std::chrono::milliseconds(1));

}  // namespace granary::testing

#endif  // GRANARY_TESTS_READ_INTO_DIGEST_H_
