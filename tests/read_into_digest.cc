#include "tests/read_into_digest.h"

#include <thread>

namespace granary::testing {

absl::StatusOr<bool> ReadIntoDigest(EpochReader& reader, int64_t n, EpochDigest& digest,
                                    std::chrono::milliseconds step) {
  for (int64_t i = 0; n < 0 || i < n; ++i) {
    std::this_thread::sleep_for(step);
    ReceivedElement element;
    bool end = false;
    if (absl::Status status = reader.Next(&element, &end); !status.ok()) return status;
    if (end) return true;
    digest.Add(element.tensors());
  }
  return false;
}

}  // namespace granary::testing
