// The position file of `granary run --position_file F` (tools/run_command.cc): where a run
// stands, so that a killed run (even SIGKILLed) started again with the same flags resumes exactly
// there. F is rewritten atomically (temp file + rename) every 100 ms while elements arrive, at
// the end of each epoch and before exiting on an error. It is a text file:
//   granary-run-position 1
//   epoch 3                       the epoch being read (or the next one to read)
//   rows 4096                     rows of that epoch delivered so far, and their
//   multiset 0123456789abcdef     multiset digest (EpochDigest), and
//   duplicates 2                  elements dropped so far (duplicates + recomputed)
//   reader <base64>               EpochReader::SavePosition(), empty at an epoch's start
// Rows, multiset digest and reader position are written together and describe exactly the same
// delivered elements. `granary chaos` reads it to time its faults by the client's progress.
#ifndef GRANARY_CLIENT_RUN_POSITION_H_
#define GRANARY_CLIENT_RUN_POSITION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace granary {

struct RunPosition {
  int64_t epoch = 0;
  int64_t rows = 0;
  uint64_t multiset = 0;
  int64_t duplicates = 0;
  std::string reader;  // EpochReader::SavePosition(); empty = the epoch's start.
};

std::string FormatRunPosition(const RunPosition& position);
// InvalidArgument naming `path` and the offending line.
absl::StatusOr<RunPosition> ParseRunPosition(const std::string& text, const std::string& path);
absl::StatusOr<RunPosition> ReadRunPositionFile(Env* env, const std::string& path);

}  // namespace granary

#endif  // GRANARY_CLIENT_RUN_POSITION_H_
