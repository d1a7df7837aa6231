// Image codecs: JPEG (libjpeg-turbo) and PNG (libpng's simplified API) to and from uint8
// tensors of shape [height, width, channels].
//
// Errors describe the bytes, not the caller ("not a JPEG but a PNG (first bytes 89 50 4E 47)", or
// libjpeg's / libpng's own message): InvalidArgument, or DataLoss for a damaged image; callers
// such as the decode UDFs prefix their name (and the pipeline the element's split and record).
// Decoding is deterministic: the same bytes always give the same pixels. All functions are
// thread-safe (no shared state).
#ifndef GRANARY_PIPELINE_IMAGE_IMAGE_CODEC_H_
#define GRANARY_PIPELINE_IMAGE_IMAGE_CODEC_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/core/limits.h"
#include "pipeline/core/tensor.h"
#include "pipeline/image/crop_window.h"

namespace granary {

enum class ImageFormat { kUnknown, kJpeg, kPng };

// The format of `bytes`, judged by its magic bytes only (JPEG: FF D8 FF; PNG: the 8-byte PNG
// signature). Never fails; kUnknown for anything else, including empty input.
ImageFormat SniffImageFormat(absl::string_view bytes);

// Up to the first 4 bytes of `bytes` in upper-case hex, space separated ("47 49 46 38"), or
// "none" for empty input: how errors show what an undecodable input starts with.
std::string FirstBytesHex(absl::string_view bytes);

// The decoders refuse images larger than kMaxImagePixels (pipeline/core/limits.h) before their
// pixels are allocated, so a corrupt header cannot exhaust memory.

// Decodes a JPEG into uint8 [height, width, channels]. `channels` is 1 (grayscale), 3 (RGB) or
// 0 (as encoded: 1 for a grayscale JPEG, 3 otherwise); color and grayscale JPEGs convert to
// either, CMYK and YCCK JPEGs (Adobe) are converted to RGB or grayscale.
// DataLoss "damaged JPEG (N bytes): <libjpeg's message>": after a valid header, damaged data
// that libjpeg would only warn about and paper over with gray (a file truncated in its image
// data, garbage in the entropy-coded data), and libjpeg's errors other than unsupported features.
// InvalidArgument: `channels` out of range, input not a JPEG (by magic bytes), libjpeg errors in
// the header or about unsupported features (with libjpeg's message), an image larger than
// kMaxImagePixels.
absl::StatusOr<Tensor> DecodeJpeg(absl::string_view bytes, int channels);

// Chooses, from an image's height and width, the window of it to decode; nullopt: all of it.
using ChooseCropWindow = std::function<std::optional<CropWindow>(int64_t height, int64_t width)>;

// Decodes the window of a JPEG that `choose` picks once the header is read: the window's
// pixels, byte for byte those of DecodeJpeg followed by cutting out the window — only the iMCU
// rows and columns that hold the window (and a pixel around it, where fancy upsampling reads)
// run the inverse DCT, upsampling and color conversion (libjpeg-turbo's jpeg_skip_scanlines and
// jpeg_crop_scanline). All of the entropy-coded data is still read, so a damaged image fails as
// DecodeJpeg fails. The errors of DecodeJpeg, and InvalidArgument for a window outside the image.
//
// With `floor` (opt-in, approximate): when the window is at least twice the floor in both
// dimensions, libjpeg-turbo decodes it scaled down by 2, 4 or 8 in the DCT domain (scale_num /
// scale_denom: a reduced inverse DCT, so the skipped detail costs no decode time) — the largest
// of those factors that keeps it at least `floor`. The result is then the window's rows
// [y / d, ceil((y + height) / d)) and columns alike of the image decoded at 1/d (d the factor):
// about the window's pixels resized by 1/d, not them exactly, but the same for the same bytes,
// window and floor on every machine with this libjpeg-turbo. Smaller windows decode exactly.
absl::StatusOr<Tensor> DecodeJpegWindow(absl::string_view bytes, int channels,
                                        const ChooseCropWindow& choose,
                                        std::optional<ScaledDecodeFloor> floor = std::nullopt);

// The factor (1, 2, 4 or 8) by which DecodeJpegWindow with `floor` scales `window` down.
int ScaledDecodeFactor(const CropWindow& window, const ScaledDecodeFloor& floor);

// Decodes a PNG into uint8 [height, width, channels]. `channels` is 1 (gray), 2 (gray + alpha),
// 3 (RGB), 4 (RGBA) or 0 (as encoded: the PNG's own color channels plus alpha if it has alpha
// or transparency). Any PNG color type and bit depth is accepted (16-bit samples are reduced to 8
// bits, palettes expanded, gAMA applied by libpng's simplified API to give sRGB). When the PNG has
// an alpha channel and `channels` is 1 or 3, the image is composited onto black.
// DataLoss "damaged PNG (N bytes): <libpng's message>": libpng errors in the image data after a
// valid header (truncated or corrupt IDAT). InvalidArgument: `channels` out of range, input not a
// PNG (by magic bytes), libpng errors in the header (with libpng's message), an image larger than
// kMaxImagePixels.
absl::StatusOr<Tensor> DecodePng(absl::string_view bytes, int channels);

// Sniffs the format and decodes a JPEG or a PNG. `channels` is 1, 3 or 0 (as encoded, see
// DecodeJpeg and DecodePng).
// InvalidArgument: "unsupported image format (first bytes 47 49 46 38): only JPEG and PNG
// are supported", and the errors of DecodeJpeg / DecodePng.
absl::StatusOr<Tensor> DecodeImage(absl::string_view bytes, int channels);

// Encodes `image`, a uint8 tensor [height, width, channels] with channels 1 or 3, as a baseline
// JPEG of `quality` (1..100, 4:2:0 chroma subsampling for color). Deterministic.
// InvalidArgument: wrong dtype, rank, channels or quality, or an empty image.
absl::StatusOr<std::string> EncodeJpeg(const Tensor& image, int quality);

}  // namespace granary

#endif  // GRANARY_PIPELINE_IMAGE_IMAGE_CODEC_H_
