// EpochDigest: the exactly-once fingerprint of one epoch's output (DESIGN.md §6).
//
// Every row (an element, or one row of a batch in a batched pipeline) is hashed with XXH64 over
// its canonical bytes: per tensor, its dtype, the row's rank and dimensions (u64 each), then the
// row's values (numeric: the raw bytes; strings: each as a u64 length and its bytes), streamed
// from where they lie. The multiset digest is the wrapping sum of the row hashes: independent of
// order, and changed by any missing or duplicated row. The ordered digest is a streaming XXH64
// over the row hashes in delivery order. Line() is the epoch's line of the digest file
// (pipeline/digests/digest_file.h). Thread-compatible.
#ifndef GRANARY_PIPELINE_DIGESTS_EPOCH_DIGEST_H_
#define GRANARY_PIPELINE_DIGESTS_EPOCH_DIGEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/hash.h"
#include "pipeline/digests/digest_file.h"
#include "pipeline/core/element.h"
#include "transport/tensor_view.h"

namespace granary {

class EpochDigest {
 public:
  // `batched`: the elements are batches whose rows are counted and hashed one by one.
  explicit EpochDigest(bool batched) : batched_(batched) {}

  void Add(const Element& element);
  // The same for an element's tensors as views (a trainer's received element).
  void Add(const std::vector<TensorView>& tensors);

  int64_t rows() const { return rows_; }
  uint64_t multiset() const { return multiset_; }
  uint64_t ordered() const { return ordered_.Digest(); }

  // This epoch's line of the digest file.
  DigestLine Line(int64_t epoch, int64_t duplicates_dropped, int64_t skipped = 0) const {
    return {epoch, rows_, multiset_, ordered(), duplicates_dropped, skipped};
  }

 private:
  const bool batched_;
  int64_t rows_ = 0;
  uint64_t multiset_ = 0;
  StreamingHash64 ordered_;
  StreamingHash64 row_;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_DIGESTS_EPOCH_DIGEST_H_
