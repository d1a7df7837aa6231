// A crop's window on an image: what a crop UDF keeps (image_crop.h) and what a partial JPEG
// decode decodes (image_codec.h).
#ifndef GRANARY_PIPELINE_IMAGE_CROP_WINDOW_H_
#define GRANARY_PIPELINE_IMAGE_CROP_WINDOW_H_

#include <cstdint>

namespace granary {

// Rows [y, y + height) and columns [x, x + width) of an image.
struct CropWindow {
  int64_t y = 0;
  int64_t x = 0;
  int64_t height = 0;
  int64_t width = 0;
};

// The smallest decoded window a crop accepts from a decode that may scale the window down in the
// DCT domain (image_codec.h, DecodeJpegWindow): the size the crop resizes its window to.
struct ScaledDecodeFloor {
  int64_t height = 0;
  int64_t width = 0;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_IMAGE_CROP_WINDOW_H_
