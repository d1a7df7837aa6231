// TrainerTailRunner: the client's side of a pipeline's trainer-side tail (pipeline/trainer_tail.h).
// A worker that leaves the tail to its reader sends each element as it was before the tail's
// normalize steps (uint8 images: a quarter of the bytes) and the steps with its answer
// (GetElementsResponse.trainer_tail); the client runs them here as it takes the element out of
// the receive buffer: one pass that reads the uint8 image and writes its float32 normalization
// straight into a new wire image (transport/element_image.h), every other tensor copied once.
// The arithmetic is the normalize UDF's (pipeline/kernels/normalize_kernel.h), so the tensors
// delivered are byte-identical to the worker's. Thread-safe (const after Create).
#ifndef GRANARY_CLIENT_TRAINER_TAIL_RUNNER_H_
#define GRANARY_CLIENT_TRAINER_TAIL_RUNNER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/kernels/normalize_kernel.h"
#include "proto/pipeline.pb.h"
#include "transport/buffer_pool.h"

namespace granary {

class TrainerTailRunner {
 public:
  // InvalidArgument naming the step for a tail this client cannot run: a step that is not a
  // normalize, a negative index, an empty mean or std, a zero std, per-channel lists of
  // different lengths, more than a client runs (kMaxTrainerTailSteps,
  // kMaxTrainerTailChannelValues), or a negative or absurd number of batch dimensions.
  static absl::StatusOr<std::unique_ptr<TrainerTailRunner>> Create(const TrainerTailDef& def);

  // The element wire image `image` with every step applied: a new image from `pool`.
  // InvalidArgument naming the step's op and the element (split, record) for an element the
  // normalize UDF would refuse on the worker — no tensor at its index, not uint8 or float32, not
  // an image [height, width, channels] (with a leading dimension per batch op after the steps),
  // channels the mean or std do not fit; ParseImage's errors for a malformed image;
  // an element that would be over 2 GiB (the worker's batch op refuses such an element too);
  // ResourceExhausted when no buffer can be had (the reader asks again).
  absl::StatusOr<BufferRef> Run(absl::string_view image, BufferPool* pool) const;

 private:
  struct Step {
    std::string label;
    int64_t index = 0;
    NormalizeKernel kernel;
  };
  TrainerTailRunner(std::vector<Step> steps, int batch_dims)
      : steps_(std::move(steps)), batch_dims_(batch_dims) {}

  const std::vector<Step> steps_;
  // Leading dimensions the batch ops after the steps added.
  const int batch_dims_;
};

}  // namespace granary

#endif  // GRANARY_CLIENT_TRAINER_TAIL_RUNNER_H_
