// Fuzz target: the client's saved positions. The same bytes are decoded as the blob of
// EpochReader::SavePosition (client/position.h) and parsed as the text of `granary run`'s
// position file (client/run_position.h), whose `reader` line holds such a blob in base64; a
// position file that parses is decoded further the way `granary run` resumes from it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "client/position.h"
#include "fuzz/fuzz_util.h"
#include "client/run_position.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  (void)granary::DecodePosition(bytes, /*job_id=*/1, /*epoch=*/0, /*consumer=*/0);

  absl::StatusOr<granary::RunPosition> position = granary::ParseRunPosition(bytes, "fuzz.pos");
  if (!position.ok()) return 0;
  // What parses formats back to text that parses to the same position.
  absl::StatusOr<granary::RunPosition> again =
      granary::ParseRunPosition(granary::FormatRunPosition(*position), "fuzz.pos");
  granary::fuzz::Check(again.ok(), "a formatted position parses");
  granary::fuzz::Check(again->epoch == position->epoch && again->rows == position->rows &&
                           again->multiset == position->multiset &&
                           again->duplicates == position->duplicates &&
                           again->reader == position->reader,
                       "a position survives format and parse");
  if (!position->reader.empty()) {
    (void)granary::DecodePosition(position->reader, 1, position->epoch, 0);
  }
  return 0;
}
