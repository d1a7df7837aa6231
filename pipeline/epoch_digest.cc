#include "pipeline/epoch_digest.h"

#include "absl/strings/str_format.h"

namespace granary {

void EpochDigest::Add(const Element& element) {
  const int64_t rows = batched_ && !element.tensors.empty() && element.tensors[0].rank() > 0
                           ? element.tensors[0].shape()[0]
                           : 1;
  for (int64_t r = 0; r < rows; ++r) {
    scratch_.clear();
    for (const Tensor& t : element.tensors) t.AppendCanonical(batched_ ? r : -1, &scratch_);
    const uint64_t h = Hash64(scratch_);
    multiset_ += h;
    ordered_.UpdateU64(h);
  }
  rows_ += rows;
}

std::string EpochDigest::ToJsonLine(int64_t epoch, int64_t duplicates_dropped) const {
  return absl::StrFormat(
      R"({"epoch":%d,"elements":%d,"multiset_xxh64":"%s","ordered_xxh64":"%s","duplicates_dropped":%d})",
      epoch, rows_, HashToHex(multiset_), HashToHex(ordered()), duplicates_dropped);
}

}  // namespace granary
