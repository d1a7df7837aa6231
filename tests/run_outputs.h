// Reading what `granary run` and `granary local` write, for the multi-process tests: digest
// files (pipeline/digest_file.h) and run position files (client/run_position.h). The digest
// reader records a gtest failure for an unreadable file.
#ifndef GRANARY_TESTS_RUN_OUTPUTS_H_
#define GRANARY_TESTS_RUN_OUTPUTS_H_

#include <cstdint>
#include <map>
#include <string>

#include "pipeline/digest_file.h"
#include "client/run_position.h"

namespace granary::testing {

using ::granary::DigestLine;
using ::granary::RunPosition;

// Epoch -> digest, from a digest file (a later line for an epoch replaces an earlier one).
std::map<int64_t, DigestLine> ReadDigests(const std::string& path);

// Where a `granary run` position file stands (a default RunPosition if the file is missing or
// unreadable: a run that has not written it yet).
RunPosition ReadRunPosition(const std::string& path);
inline int64_t PositionRows(const std::string& path) { return ReadRunPosition(path).rows; }

}  // namespace granary::testing

#endif  // GRANARY_TESTS_RUN_OUTPUTS_H_
