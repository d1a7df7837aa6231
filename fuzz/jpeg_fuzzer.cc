// Fuzz target: the JPEG decoder (pipeline/image/image_codec.h, libjpeg-turbo) and DecodeImage's
// format sniffing. The channels asked for (0, 1 or 3) follow from the input's size, so that a
// corpus covers every conversion without changing the image bytes. The partial decode
// (DecodeJpegWindow) of a window that also follows from the input's size must give exactly the
// whole decode's pixels of that window, or its error.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"
#include "fuzz/image_check.h"
#include "pipeline/image/image_codec.h"
#include "pipeline/image/image_crop.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  static constexpr int kChannels[] = {0, 1, 3};
  const int channels = kChannels[size % 3];
  const absl::StatusOr<granary::Tensor> whole = granary::DecodeJpeg(bytes, channels);
  granary::fuzz::CheckDecodedImage(whole, channels, 3);
  granary::CropWindow window;
  const absl::StatusOr<granary::Tensor> part = granary::DecodeJpegWindow(
      bytes, channels, [&](int64_t height, int64_t width) -> std::optional<granary::CropWindow> {
        window.height = 1 + static_cast<int64_t>(size % 7) * (height - 1) / 6;
        window.width = 1 + static_cast<int64_t>(size % 5) * (width - 1) / 4;
        window.y = static_cast<int64_t>(size % 3) * (height - window.height) / 2;
        window.x = static_cast<int64_t>(size % 11) * (width - window.width) / 10;
        return window;
      });
  granary::fuzz::Check(part.ok() == whole.ok(), "the partial decode fails where the whole fails");
  if (whole.ok() && part.ok()) {
    granary::fuzz::Check(*part == granary::CropImage(*whole, window),
                         "the partial decode gives the whole decode's window");
  } else {
    granary::fuzz::Check(part.status() == whole.status(),
                         "the partial decode fails as the whole decode fails");
  }
  if (granary::SniffImageFormat(bytes) != granary::ImageFormat::kJpeg) {
    // DecodeImage of a non-JPEG: the sniffing and the "unsupported format" error.
    granary::fuzz::CheckDecodedImage(granary::DecodeImage(bytes, channels), channels, 4);
  }
  return 0;
}
