// The reference a process test compares a served epoch with: the same pipeline run in this
// process (pipeline/local_runner.h) and fingerprinted like the reader's rows (EpochDigest).
#ifndef GRANARY_TESTS_IN_PROCESS_DIGEST_H_
#define GRANARY_TESTS_IN_PROCESS_DIGEST_H_

#include <cstdint>

#include "proto/pipeline.pb.h"

namespace granary::testing {

struct InProcessDigest {
  uint64_t multiset = 0;
  int64_t rows = 0;
};

// Epoch `epoch` of `def` with `seed`, with the built-in UDFs. A pipeline that does not build or
// run fails the calling test (gtest) and gives an empty digest.
InProcessDigest DigestInProcess(const PipelineDef& def, uint64_t seed, int64_t epoch);

}  // namespace granary::testing

#endif  // GRANARY_TESTS_IN_PROCESS_DIGEST_H_
