// BatchPlacement: rows written into their batch by the threads that made them.
//
// When a parallel_map feeds a batch op directly (Pipeline::MakeIterator shares one
// BatchPlacement between them), each of the parallel_map's threads, right after its UDFs made a
// row, copies the row's numeric tensors into the place the batch will hold them — the content
// regions of the batch's wire image (transport/element_image.h) — while the row is still hot in
// that thread's cache, and turns the row's tensors into views of that place. The batch op then
// finds its rows already in place and only writes the image's provenance: the copy into the
// batch costs no serial pass on the batch op's thread and reads the row from cache rather than
// memory, which is what keeps batch (and the prefetch after it) off the pipeline's critical path.
// A map stage (on the batch op's own thread) places its rows too. Better still, Destinations()
// lets the UDF that makes the row's tensor (normalize, say) make it
// in its place to begin with (row_destination.h): then there is no copy at all.
//
// Placement is a guess made before the batch exists: the row that is output n-th (its sequence
// number in the parallel_map's output, counted from the iterator's start or its Restore) goes
// to slot n % batch_size of batch n / batch_size, in an image laid out from the first row of
// that batch to finish (or, for rows started before that, shaped like the previous batch). Whenever the guess is wrong — an element failed its UDF and the rows
// after it moved up, a row's shape differs, a row holds strings, the last batch is smaller, a
// row was restored from a checkpoint — the batch op sees rows not in place and copies them into
// a new image as it would without placement. Correctness never depends on placement.
//
// Thread-safe.
#ifndef GRANARY_PIPELINE_CORE_BATCH_PLACEMENT_H_
#define GRANARY_PIPELINE_CORE_BATCH_PLACEMENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "pipeline/core/element.h"
#include "pipeline/core/row_destination.h"
#include "transport/buffer_pool.h"
#include "transport/element_image.h"

namespace granary {

class BatchPlacement {
 public:
  // Images come from `pool` (must outlive the placement).
  BatchPlacement(int64_t batch_size, BufferPool* pool) : batch_size_(batch_size), pool_(pool) {}

  // Where the tensors of the row with output sequence number `seq` go: for
  // ScopedRowDestinations around the UDFs that make the row, so that they write it there
  // directly. The batch's image is laid out by the first of its rows to finish or, before that,
  // as the previous batch was (a guess Place checks). Empty before any row finished.
  std::vector<RowDestination> Destinations(int64_t seq);

  // Puts `row`'s numeric tensors in their place for output sequence number `seq`: those a UDF
  // made there stay, the others are copied there and become views of it. Leaves `row` as it is
  // when it cannot be placed (the batch op then copies it).
  void Place(int64_t seq, Element& row);

  // The image batch `batch` (rows batch * batch_size ...) was placed into, if any rows were:
  // its buffer (sized for the longest provenance; the batch op writes the real one and
  // truncates) and its layout. Drops the images of this and every earlier batch.
  struct Placed {
    BufferRef image;
    std::vector<ImageTensorSpec> specs;
  };
  std::optional<Placed> Take(int64_t batch);

  int64_t batch_size() const { return batch_size_; }

 private:
  struct Batch {
    Placed placed;
    std::unique_ptr<ImageLayout> layout;
  };
  // The batch `batch` is laid out for, laying it out from `row` if it is not yet (null when it
  // cannot be: too late, or no memory).
  Batch* FindOrLayOut(int64_t batch, const Element* row) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t batch_size_;
  BufferPool* const pool_;
  absl::Mutex mu_;
  std::map<int64_t, Batch> batches_ ABSL_GUARDED_BY(mu_);
  // The layout of the last batch laid out from a row: the guess for the next ones.
  std::vector<ImageTensorSpec> last_specs_ ABSL_GUARDED_BY(mu_);
  // Batches up to this one were taken (or given up).
  int64_t taken_through_ ABSL_GUARDED_BY(mu_) = -1;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_BATCH_PLACEMENT_H_
