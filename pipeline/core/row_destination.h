// RowDestination: where the next tensor a UDF makes should live — its place in the batch the row
// is headed for (batch_placement.h). While a ScopedRowDestinations is alive on a thread,
// Tensor::Uninitialized of a dtype and shape that match an unclaimed destination returns a view
// of that destination instead of fresh memory, so the UDF that makes a row's final tensor (a
// normalize, a crop) writes its output straight into the batch and no copy follows.
//
// A destination is a hint, never a promise: BatchPlacement::Place checks where each tensor of
// the finished row actually is and copies what is not in place (a UDF that claimed a destination
// for a temporary, or made its output some other way), or gives the row up to the batch op's
// copying path. Thread-compatible (each thread has its own).
#ifndef GRANARY_PIPELINE_CORE_ROW_DESTINATION_H_
#define GRANARY_PIPELINE_CORE_ROW_DESTINATION_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "proto/pipeline.pb.h"

namespace granary {

struct RowDestination {
  DataType dtype = DT_INVALID;
  std::vector<int64_t> shape;
  char* data = nullptr;
  // Keeps the memory alive for as long as a tensor views it.
  std::shared_ptr<const void> keeper;
  bool claimed = false;
};

// Makes `destinations` (may be null: none) the calling thread's for its lifetime.
class ScopedRowDestinations {
 public:
  explicit ScopedRowDestinations(std::vector<RowDestination>* destinations);
  ~ScopedRowDestinations();
  ScopedRowDestinations(const ScopedRowDestinations&) = delete;
  ScopedRowDestinations& operator=(const ScopedRowDestinations&) = delete;

  // The first unclaimed destination of the calling thread for `dtype` and `shape`, claimed;
  // null when there is none.
  static RowDestination* Claim(DataType dtype, const std::vector<int64_t>& shape);

  // Whether `data` is the start of one of the calling thread's claimed destinations: a tensor
  // there goes to a batch, not to the next op (a UDF may write it with streaming stores).
  static bool IsClaimedDestination(const void* data);

 private:
  std::vector<RowDestination>* previous_;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_ROW_DESTINATION_H_
