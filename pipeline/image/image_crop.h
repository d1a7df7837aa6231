// Image crops, and CropUdf: what the crop UDFs (random_crop, random_resized_crop) have in
// common — a window chosen from the image's size and the call's random key, cut out, then
// finished (resized, for random_resized_crop). Splitting the choice of the window from the pixels
// lets a JPEG decode right before the crop decode only the window (decode_crop_fusion.h) and
// give the same bytes as decoding everything and cropping.
#ifndef GRANARY_PIPELINE_IMAGE_IMAGE_CROP_H_
#define GRANARY_PIPELINE_IMAGE_IMAGE_CROP_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "pipeline/image/crop_window.h"
#include "pipeline/core/tensor.h"
#include "pipeline/core/udf.h"

namespace granary {

// `image` (numeric [height, width, channels]) cut to `window`; the image itself when the window
// is all of it. REQUIRES: the window lies inside the image.
Tensor CropImage(Tensor image, const CropWindow& window);

class CropUdf : public Udf {
 public:
  // `name`: the UDF's (errors start with it); `index`: the image tensor's index in the element.
  CropUdf(const char* name, int64_t index) : name_(name), index_(index) {}

  // The window kept of an image of `height` x `width` for `call` — a pure function of them, so
  // a fused decode and Map choose the same. InvalidArgument when the image cannot be cropped so
  // (smaller than a fixed crop size).
  virtual absl::StatusOr<CropWindow> Window(int64_t height, int64_t width,
                                            const UdfCall& call) const = 0;
  // The element's tensor from the window's pixels (uint8 or float32 [h, w, c]).
  virtual absl::StatusOr<Tensor> Finish(Tensor cropped) const = 0;
  // Whether a fused decode may hand Finish the window scaled down in the DCT domain, and to no
  // less than what (DecodeJpegWindow's `floor`): only for crops that resize and whose pipeline
  // asked for it (random_resized_crop's dct_scaling). nullopt: the window's exact pixels.
  virtual std::optional<ScaledDecodeFloor> scaled_decode_floor() const { return std::nullopt; }

  // The image at index() (uint8 or float32 [height, width, channels]): Window, CropImage, Finish.
  absl::Status Map(Element& element, const UdfCall& call) const final;

  const char* name() const { return name_; }
  int64_t index() const { return index_; }

 private:
  const char* const name_;
  const int64_t index_;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_IMAGE_IMAGE_CROP_H_
