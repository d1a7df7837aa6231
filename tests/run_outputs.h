// Reading what `granary run` and `granary local` write, for the multi-process tests: digest
// files (one JSON line per epoch, EpochDigest::ToJsonLine) and run position files
// (tools/run_command.cc). Readers record gtest failures for malformed lines.
#ifndef GRANARY_TESTS_RUN_OUTPUTS_H_
#define GRANARY_TESTS_RUN_OUTPUTS_H_

#include <cstdint>
#include <map>
#include <string>

namespace granary::testing {

struct DigestLine {
  int64_t rows = 0;
  uint64_t multiset = 0;
  uint64_t ordered = 0;
  int64_t dropped = 0;
};

// Epoch -> digest, from a digest file (a later line for an epoch replaces an earlier one).
std::map<int64_t, DigestLine> ReadDigests(const std::string& path);

// Where a `granary run` position file stands: the epoch being read and the rows of it
// delivered so far ({0, 0} if the file is missing or unreadable).
struct RunPosition {
  int64_t epoch = 0;
  int64_t rows = 0;
};
RunPosition ReadRunPosition(const std::string& path);
inline int64_t PositionRows(const std::string& path) { return ReadRunPosition(path).rows; }

}  // namespace granary::testing

#endif  // GRANARY_TESTS_RUN_OUTPUTS_H_
