// Bilinear image resizing, shared by the resize and random_resized_crop UDFs.
//
// Sampling uses half-pixel centers (as tf.image.resize, OpenCV INTER_LINEAR and PIL without
// antialiasing): output pixel i samples the input at (i + 0.5) * in / out - 0.5, clamped to the
// image, so upscaling preserves the corner pixels. Arithmetic is float32; uint8 results are
// rounded to nearest and clamped to [0, 255]. Deterministic and thread-safe.
#ifndef GRANARY_PIPELINE_IMAGE_IMAGE_RESIZE_H_
#define GRANARY_PIPELINE_IMAGE_IMAGE_RESIZE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/core/tensor.h"

namespace granary {

// `image` (uint8 or float32 [height, width, channels]) resized to [height, width, channels] of
// the same dtype; the image itself when its size is already that. REQUIRES: height, width > 0
// and within the limits of pipeline/core/limits.h (the UDFs check their params).
// InvalidArgument for an empty image; ResourceExhausted when the output would exceed
// kMaxElementBytes. Errors start with `who` (the UDF's name).
absl::StatusOr<Tensor> ResizeImage(Tensor image, int64_t height, int64_t width,
                                   absl::string_view who);

}  // namespace granary

#endif  // GRANARY_PIPELINE_IMAGE_IMAGE_RESIZE_H_
