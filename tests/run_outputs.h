// Reading what `granary run` and `granary local` write, for the multi-process tests: digest
// files (pipeline/digests/digest_file.h) and run position files (client/run_position.h) — and making
// the reference digests and test data with `granary local` and `granary datagen`. The digest
// reader records a gtest failure for an unreadable file.
#ifndef GRANARY_TESTS_RUN_OUTPUTS_H_
#define GRANARY_TESTS_RUN_OUTPUTS_H_

#include <cstdint>
#include <map>
#include <string>

#include "client/run_position.h"
#include "pipeline/digests/digest_file.h"

namespace granary::testing {

using ::granary::DigestLine;
using ::granary::RunPosition;

// Epoch -> digest, from a digest file (a later line for an epoch replaces an earlier one).
std::map<int64_t, DigestLine> ReadDigests(const std::string& path);

// Where a `granary run` position file stands (a default RunPosition if the file is missing or
// unreadable: a run that has not written it yet).
RunPosition ReadRunPosition(const std::string& path);
inline int64_t PositionRows(const std::string& path) { return ReadRunPosition(path).rows; }

// `granary datagen imagenet` of `images` 16x16 JPEGs in 4 TFRecord files under `out` (a gtest
// failure naming its output, and false, if it fails).
bool GenerateImagenet(const std::string& out, int64_t images);

// `granary local` of `pipeline` for `epochs` epochs with `seed` and `cache_policy`, writing its
// digests to `digest_path`: the digests read back (empty, with a gtest failure naming the
// output, if it fails).
std::map<int64_t, DigestLine> LocalDigests(const std::string& pipeline, int epochs, uint64_t seed,
                                           const std::string& cache_policy,
                                           const std::string& digest_path);

}  // namespace granary::testing

#endif  // GRANARY_TESTS_RUN_OUTPUTS_H_
