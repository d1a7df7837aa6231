#include "pipeline/epoch_digest.h"

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

}  // namespace granary
