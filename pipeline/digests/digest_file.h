// The digest file of DESIGN.md §6: one JSON object per line and epoch,
//   {"epoch":0,"elements":1000,"multiset_xxh64":"…","ordered_xxh64":"…","duplicates_dropped":0,
//    "skipped":0}
// written by `granary local` and `granary run`, compared by tests and `granary chaos`. Two runs
// delivered the same rows exactly once when their lines agree on elements and multiset_xxh64.
#ifndef GRANARY_PIPELINE_DIGESTS_DIGEST_FILE_H_
#define GRANARY_PIPELINE_DIGESTS_DIGEST_FILE_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace granary {

struct DigestLine {
  int64_t epoch = 0;
  int64_t rows = 0;       // "elements": rows delivered.
  uint64_t multiset = 0;  // Order-independent (EpochDigest::multiset).
  uint64_t ordered = 0;   // Delivery order (EpochDigest::ordered).
  int64_t dropped = 0;    // "duplicates_dropped": duplicates and recomputed elements.
  int64_t skipped = 0;    // "skipped": elements ignore_errors dropped (0 when absent).
  // Equal shares (proto/digest.proto; 0 when absent): elements handed to the trainer, own and
  // padding; padding; elements read but not handed out (their rows are counted above).
  int64_t steps = 0;
  int64_t padding = 0;
  int64_t remainder_dropped = 0;

  // The line, without a trailing newline.
  std::string ToJson() const;
  // Parses `line` as JSON through protobuf's JSON mapping (proto/digest.proto), so any spacing
  // and key order reads, unknown keys are ignored and a missing "skipped" is 0. InvalidArgument
  // for what is no JSON object of those fields, or naming the missing or malformed field.
  static absl::StatusOr<DigestLine> Parse(const std::string& line);
};

// Epoch -> line of the file at `path`; a later line for an epoch replaces an earlier one (a run
// killed between writing an epoch's line and its position writes it again). Errors name the
// file and line.
absl::StatusOr<std::map<int64_t, DigestLine>> ReadDigestFile(Env* env, const std::string& path);

}  // namespace granary

#endif  // GRANARY_PIPELINE_DIGESTS_DIGEST_FILE_H_
