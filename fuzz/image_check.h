// The contract both image fuzz targets check on a decoded image (pipeline/image/image_codec.h).
#ifndef GRANARY_FUZZ_IMAGE_CHECK_H_
#define GRANARY_FUZZ_IMAGE_CHECK_H_

#include "absl/status/statusor.h"
#include "fuzz/fuzz_util.h"
#include "pipeline/core/limits.h"
#include "pipeline/core/tensor.h"

namespace granary::fuzz {

// A decoded image is uint8 [height, width, channels] with `channels` channels (any of
// `max_channels` or fewer when 0 was asked), within kMaxImagePixels, its bytes all there.
inline void CheckDecodedImage(const absl::StatusOr<Tensor>& image, int channels, int max_channels) {
  if (!image.ok()) return;
  Check(image->dtype() == DT_UINT8, "a decoded image is uint8");
  Check(image->rank() == 3, "a decoded image is [height, width, channels]");
  const int64_t height = image->shape()[0], width = image->shape()[1], c = image->shape()[2];
  Check(height > 0 && width > 0, "a decoded image is not empty");
  Check(channels == 0 ? (c >= 1 && c <= max_channels) : c == channels,
        "a decoded image has the channels asked for");
  Check(height * width <= kMaxImagePixels, "a decoded image is within kMaxImagePixels");
  Check(static_cast<int64_t>(image->content().size()) == height * width * c,
        "a decoded image holds all its bytes");
}

}  // namespace granary::fuzz

#endif  // GRANARY_FUZZ_IMAGE_CHECK_H_
