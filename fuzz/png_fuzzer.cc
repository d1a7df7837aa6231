// Fuzz target: the PNG decoder (pipeline/image/image_codec.h, libpng's simplified API). The channels
// asked for (0 to 4) follow from the input's size, so that a corpus covers every conversion
// without changing the image bytes.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "fuzz/image_check.h"
#include "pipeline/image/image_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  const int channels = static_cast<int>(size % 5);
  granary::fuzz::CheckDecodedImage(granary::DecodePng(bytes, channels), channels, 4);
  return 0;
}
