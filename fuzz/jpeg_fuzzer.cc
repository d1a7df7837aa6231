// Fuzz target: the JPEG decoder (pipeline/image_codec.h, libjpeg-turbo) and DecodeImage's
// format sniffing. The channels asked for (0, 1 or 3) follow from the input's size, so that a
// corpus covers every conversion without changing the image bytes.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "fuzz/image_check.h"
#include "pipeline/image_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  static constexpr int kChannels[] = {0, 1, 3};
  const int channels = kChannels[size % 3];
  granary::fuzz::CheckDecodedImage(granary::DecodeJpeg(bytes, channels), channels, 3);
  if (granary::SniffImageFormat(bytes) != granary::ImageFormat::kJpeg) {
    // DecodeImage of a non-JPEG: the sniffing and the "unsupported format" error.
    granary::fuzz::CheckDecodedImage(granary::DecodeImage(bytes, channels), channels, 4);
  }
  return 0;
}
