#include "pipeline/udfs/decode_crop_fusion.h"

#include <optional>
#include <string>
#include <utility>

#include "common/status_macros.h"
#include "pipeline/image/image_codec.h"
#include "pipeline/image/image_crop.h"
#include "pipeline/udfs/udf_decode_image.h"

namespace granary {

bool FusesDecodeCrop(const Udf& decode, const Udf& crop) {
  const auto* decoder = dynamic_cast<const DecodeImageUdf*>(&decode);
  const auto* cropper = dynamic_cast<const CropUdf*>(&crop);
  return decoder != nullptr && cropper != nullptr && decoder->index() == cropper->index();
}

absl::Status RunDecodeCrop(const Udf& decode, const UdfCall& decode_call, const Udf& crop,
                           const UdfCall& crop_call, Element& element, bool* crop_failed) {
  const auto& decoder = static_cast<const DecodeImageUdf&>(decode);
  const auto& cropper = static_cast<const CropUdf&>(crop);
  *crop_failed = false;
  ASSIGN_OR_RETURN(Tensor * t, decoder.EncodedImage(element));
  if (SniffImageFormat(t->strings()[0]) != ImageFormat::kJpeg) {
    RETURN_IF_ERROR(decoder.Map(element, decode_call));
    *crop_failed = true;
    RETURN_IF_ERROR(cropper.Map(element, crop_call));
    *crop_failed = false;
    return absl::OkStatus();
  }
  // A crop that cannot choose a window (the image is smaller than it) fails after a whole
  // decode, as unfused: a damaged image then still reports its damage first.
  absl::Status window_status;
  absl::StatusOr<Tensor> image = DecodeJpegWindow(
      t->strings()[0], decoder.channels(),
      [&](int64_t height, int64_t width) -> std::optional<CropWindow> {
        absl::StatusOr<CropWindow> window = cropper.Window(height, width, crop_call);
        if (window.ok()) return *window;
        window_status = window.status();
        return std::nullopt;
      },
      cropper.scaled_decode_floor());
  if (!image.ok()) return Annotate(image.status(), decoder.name());
  *crop_failed = true;
  RETURN_IF_ERROR(window_status);
  ASSIGN_OR_RETURN(*t, cropper.Finish(*std::move(image)));
  *crop_failed = false;
  return absl::OkStatus();
}

}  // namespace granary
