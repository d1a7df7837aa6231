#include "pipeline/image/image_codec.h"

#include <algorithm>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// jpeglib.h needs <cstdio> (FILE, size_t) first, and jerror.h (the JWRN_ message codes) needs
// jpeglib.h's configuration first.
// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on
#include <png.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace granary {
namespace {

constexpr unsigned char kJpegMagic[] = {0xFF, 0xD8, 0xFF};
constexpr unsigned char kPngMagic[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

bool StartsWith(absl::string_view bytes, const unsigned char* magic, size_t size) {
  return bytes.size() >= size && std::memcmp(bytes.data(), magic, size) == 0;
}

absl::Status TooLarge(int64_t height, int64_t width) {
  return absl::InvalidArgumentError(absl::StrCat("image ", height, "x", width,
                                                 " (height x width) has more than ",
                                                 kMaxImagePixels, " pixels"));
}

// ---- libjpeg plumbing ----------------------------------------------------------------------
//
// libjpeg reports fatal errors by calling error_exit, which must not return. Ours formats the
// message and longjmps back to the setjmp in RunJpegDecode / RunJpegEncode. Everything those
// functions need after the jump lives in a state struct owned by their caller (never in a local
// modified after setjmp), and only C frames (libjpeg's) lie between setjmp and longjmp.

struct JpegErrorManager {
  jpeg_error_mgr pub;  // First member: libjpeg sees a jpeg_error_mgr*.
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  // Set by the decoder once the header is read: a fatal error after it is in the image data.
  bool header_read = false;
  // Whether the jump reports damaged data (a corrupt-data warning, or a fatal error after the
  // header) rather than an input that is no valid JPEG.
  bool damaged = false;
};

// libjpeg's errors about features it does not support: the image is not damaged, just not
// decodable here, even when they come after the header.
bool IsUnsupportedFeatureError(int msg_code) {
  switch (msg_code) {
    case JERR_ARITH_NOTIMPL:
    case JERR_CCIR601_NOTIMPL:
    case JERR_CONVERSION_NOTIMPL:
    case JERR_FRACT_SAMPLE_NOTIMPL:
    case JERR_NOTIMPL:
    case JERR_NOT_COMPILED:
    case JERR_EMPTY_IMAGE:
    case JERR_IMAGE_TOO_BIG:
      return true;
    default:
      return false;
  }
}

void JpegErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  err->damaged = err->header_read && !IsUnsupportedFeatureError(err->pub.msg_code);
  longjmp(err->jump, 1);
}

// libjpeg's warnings that the data is damaged: after them libjpeg carries on and fills what it
// could not decode with gray, which djpeg reports by exiting 2. Other warnings (an unknown JFIF
// revision or Adobe transform, an odd progression script) describe images that decode fine.
bool IsDamageWarning(int msg_code) {
  switch (msg_code) {
    case JWRN_JPEG_EOF:         // Premature end of JPEG file
    case JWRN_HIT_MARKER:       // Corrupt JPEG data: premature end of data segment
    case JWRN_EXTRANEOUS_DATA:  // Corrupt JPEG data: N extraneous bytes before marker
    case JWRN_HUFF_BAD_CODE:    // Corrupt JPEG data: bad Huffman code
    case JWRN_ARITH_BAD_CODE:   // Corrupt JPEG data: bad arithmetic code
    case JWRN_MUST_RESYNC:      // Corrupt JPEG data: found marker instead of RST
    case JWRN_NOT_SEQUENTIAL:   // Invalid SOS parameters for sequential JPEG
      return true;
    default:
      return false;
  }
}

// A damage warning in the image data ends the decode like an error (DataLoss); other warnings,
// and those in the header (where libjpeg goes on to a fatal error of its own), are counted only.
void JpegEmitMessage(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return;  // Trace messages.
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  ++err->pub.num_warnings;
  if (!err->header_read || !IsDamageWarning(err->pub.msg_code)) return;
  (*cinfo->err->format_message)(cinfo, err->message);
  err->damaged = true;
  longjmp(err->jump, 1);
}

void InstallErrorManager(JpegErrorManager* err) {
  jpeg_std_error(&err->pub);
  err->pub.error_exit = JpegErrorExit;
  err->pub.emit_message = JpegEmitMessage;
  err->message[0] = '\0';
}

struct JpegDecodeState {
  jpeg_decompress_struct cinfo;
  JpegErrorManager err;
  std::string problem;            // Why RunJpegDecode failed.
  std::vector<uint8_t> cmyk_row;  // Scratch row for CMYK / YCCK input.
  // The window to decode (all of the image when choose is null or declines).
  const ChooseCropWindow* choose = nullptr;
  const ScaledDecodeFloor* floor = nullptr;  // may scale the window down (DecodeJpegWindow)
  CropWindow window;          // in the coordinates of the image as decoded (scaled down, if it is)
  std::vector<uint8_t> rows;  // Scratch rows of a window's decoded iMCU columns.
};

// Converts one row of 4-component CMYK (as libjpeg returns it) to RGB or gray. Adobe writes
// CMYK inverted (0 = full ink), which is what virtually every CMYK JPEG is.
void CmykRowTo(const uint8_t* cmyk, int64_t width, bool inverted, int channels, uint8_t* out) {
  for (int64_t x = 0; x < width; ++x, cmyk += 4) {
    int c = cmyk[0], m = cmyk[1], y = cmyk[2], k = cmyk[3];
    if (!inverted) {
      c = 255 - c;
      m = 255 - m;
      y = 255 - y;
      k = 255 - k;
    }
    const int r = (c * k + 127) / 255;
    const int g = (m * k + 127) / 255;
    const int b = (y * k + 127) / 255;
    if (channels == 3) {
      out[0] = static_cast<uint8_t>(r);
      out[1] = static_cast<uint8_t>(g);
      out[2] = static_cast<uint8_t>(b);
      out += 3;
    } else {
      // ITU-R BT.601 luma, the weights libjpeg itself uses for RGB -> gray.
      *out++ = static_cast<uint8_t>((r * 19595 + g * 38470 + b * 7471 + 32768) >> 16);
    }
  }
}

// Rows handed to libjpeg per jpeg_read_scanlines call.
constexpr int kRowsPerCall = 16;

// Decodes s->window's rows and columns into *out (after jpeg_start_decompress), reading past the
// window to the end of the image so that damage anywhere is found. False when libjpeg cannot
// skip, with the reason in s->problem; when it stops reading early, output_scanline stays below
// output_height, which the caller reports as for a whole decode.
bool DecodeWindowRows(JpegDecodeState* s, bool cmyk, int channels, Tensor* out) {
  const CropWindow& window = s->window;
  // One pixel beyond the window on each side: fancy upsampling makes the first and last pixel of
  // a cropped scanline from the edge's chroma alone, so those must be pixels the window drops.
  // And at least two iMCU columns: a scanline of a single chroma sample is upsampled unlike the
  // same sample within a wider one (found by DecodeJpegWindowTest).
  const int64_t image_width = s->cinfo.output_width;
  const int64_t min_width = 2 * s->cinfo.max_h_samp_factor * DCTSIZE;
  int64_t begin = std::max<int64_t>(window.x - 1, 0);
  int64_t end = std::min<int64_t>(window.x + window.width + 1, image_width);
  end = std::min(std::max(end, begin + min_width), image_width);
  begin = std::max<int64_t>(std::min(begin, end - min_width), 0);
  JDIMENSION x = static_cast<JDIMENSION>(begin);
  JDIMENSION width = static_cast<JDIMENSION>(end - begin);
  if (width < image_width) jpeg_crop_scanline(&s->cinfo, &x, &width);  // Whole iMCU columns.
  const size_t components = s->cinfo.output_components;
  const size_t decoded_stride = static_cast<size_t>(s->cinfo.output_width) * components;
  const size_t skip_bytes = static_cast<size_t>(window.x - x) * components;
  if (window.y > 0 && jpeg_skip_scanlines(&s->cinfo, static_cast<JDIMENSION>(window.y)) !=
                          static_cast<JDIMENSION>(window.y)) {
    s->problem = absl::StrCat("libjpeg could not skip to row ", window.y);
    s->err.damaged = true;
    return false;
  }
  *out = Tensor::Uninitialized(DT_UINT8, {window.height, window.width, channels});
  uint8_t* base = out->data<uint8_t>();
  const size_t stride = static_cast<size_t>(window.width) * channels;
  s->rows.resize(kRowsPerCall * decoded_stride);
  JSAMPROW rows[kRowsPerCall];
  for (int i = 0; i < kRowsPerCall; ++i) rows[i] = s->rows.data() + i * decoded_stride;
  for (int64_t done = 0; done < window.height;) {
    const int n = static_cast<int>(std::min<int64_t>(kRowsPerCall, window.height - done));
    const JDIMENSION read = jpeg_read_scanlines(&s->cinfo, rows, n);
    if (read == 0) return true;  // Stopped early: the caller reports it.
    for (JDIMENSION i = 0; i < read; ++i, ++done) {
      uint8_t* dst = base + done * stride;
      if (cmyk) {
        CmykRowTo(rows[i] + skip_bytes, window.width, s->cinfo.saw_Adobe_marker, channels, dst);
      } else {
        std::memcpy(dst, rows[i] + skip_bytes, stride);
      }
    }
  }
  // Through the rest of the entropy-coded data, for its damage: skipping to the very end would
  // not read it (libjpeg-turbo just declares the end reached), skipping all but the last row does.
  const JDIMENSION rest = s->cinfo.output_height - s->cinfo.output_scanline;
  if (rest > 1 && jpeg_skip_scanlines(&s->cinfo, rest - 1) != rest - 1) {
    s->problem =
        absl::StrCat("libjpeg could not skip to the end from row ", s->cinfo.output_scanline);
    s->err.damaged = true;
    return false;
  }
  if (rest > 0) jpeg_read_scanlines(&s->cinfo, rows, 1);  // Short: the caller reports it.
  return true;
}

// Decodes `bytes` into *out. Returns false on failure with the reason in s->problem (or in
// s->err.message for libjpeg errors). The caller destroys s->cinfo in either case.
bool RunJpegDecode(absl::string_view bytes, int requested_channels, JpegDecodeState* s,
                   Tensor* out) {
  s->cinfo.err = &s->err.pub;
  InstallErrorManager(&s->err);
  if (setjmp(s->err.jump)) {
    s->problem = s->err.message;
    return false;
  }
  jpeg_create_decompress(&s->cinfo);
  jpeg_mem_src(&s->cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&s->cinfo, TRUE);
  s->err.header_read = true;

  const int64_t height = s->cinfo.image_height;
  const int64_t width = s->cinfo.image_width;
  if (height * width > kMaxImagePixels) {
    s->problem = std::string(TooLarge(height, width).message());
    return false;
  }
  s->window = CropWindow{0, 0, height, width};
  if (s->choose != nullptr) {
    const std::optional<CropWindow> window = (*s->choose)(height, width);
    if (window.has_value()) {
      const CropWindow& w = *window;
      if (w.y < 0 || w.x < 0 || w.height <= 0 || w.width <= 0 || w.y + w.height > height ||
          w.x + w.width > width) {
        s->problem = absl::StrCat("the window of ", w.height, "x", w.width, " at (", w.y, ", ", w.x,
                                  ") is not inside the image of ", height, "x", width);
        return false;
      }
      s->window = w;
    }
  }
  // DCT-domain scaling: output_height and _width become ceil(height / factor) and alike.
  const int factor = s->floor != nullptr ? ScaledDecodeFactor(s->window, *s->floor) : 1;
  const int64_t out_height = (height + factor - 1) / factor;
  const int64_t out_width = (width + factor - 1) / factor;
  if (factor > 1) {
    s->cinfo.scale_num = 1;
    s->cinfo.scale_denom = static_cast<unsigned int>(factor);
    const CropWindow& w = s->window;
    const int64_t y = w.y / factor;
    const int64_t x = w.x / factor;
    s->window = CropWindow{y, x, std::min((w.y + w.height + factor - 1) / factor, out_height) - y,
                           std::min((w.x + w.width + factor - 1) / factor, out_width) - x};
  }
  const bool cmyk = s->cinfo.jpeg_color_space == JCS_CMYK || s->cinfo.jpeg_color_space == JCS_YCCK;
  const int channels =
      requested_channels != 0 ? requested_channels : (s->cinfo.num_components == 1 ? 1 : 3);
  if (cmyk) {
    s->cinfo.out_color_space = JCS_CMYK;
  } else {
    s->cinfo.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  }
  jpeg_start_decompress(&s->cinfo);
  const int expected_components = cmyk ? 4 : channels;
  if (s->cinfo.output_components != expected_components ||
      static_cast<int64_t>(s->cinfo.output_height) != out_height ||
      static_cast<int64_t>(s->cinfo.output_width) != out_width) {
    s->problem = absl::StrCat("libjpeg produced ", s->cinfo.output_components, " components at ",
                              s->cinfo.output_height, "x", s->cinfo.output_width, ", expected ",
                              expected_components, " at ", out_height, "x", out_width);
    return false;
  }

  const CropWindow& window = s->window;
  if (window.height != out_height || window.width != out_width) {
    if (!DecodeWindowRows(s, cmyk, channels, out)) return false;
  } else {
    *out = Tensor::Uninitialized(DT_UINT8, {out_height, out_width, channels});
    uint8_t* base = out->data<uint8_t>();
    const size_t stride = static_cast<size_t>(out_width) * channels;
    if (cmyk) {
      s->cmyk_row.resize(static_cast<size_t>(out_width) * 4);
      JSAMPROW row = s->cmyk_row.data();
      const bool inverted = s->cinfo.saw_Adobe_marker;
      while (s->cinfo.output_scanline < s->cinfo.output_height) {
        const size_t y = s->cinfo.output_scanline;
        if (jpeg_read_scanlines(&s->cinfo, &row, 1) != 1) break;
        CmykRowTo(row, out_width, inverted, channels, base + y * stride);
      }
    } else {
      // Hand libjpeg several output rows at once; it decodes straight into the tensor.
      JSAMPROW rows[kRowsPerCall];
      while (s->cinfo.output_scanline < s->cinfo.output_height) {
        const size_t y = s->cinfo.output_scanline;
        const int n = static_cast<int>(
            std::min<size_t>(kRowsPerCall, s->cinfo.output_height - s->cinfo.output_scanline));
        for (int i = 0; i < n; ++i) rows[i] = base + (y + i) * stride;
        if (jpeg_read_scanlines(&s->cinfo, rows, n) == 0) break;
      }
    }
  }
  if (s->cinfo.output_scanline < s->cinfo.output_height) {
    s->problem = absl::StrCat("libjpeg stopped at row ", s->cinfo.output_scanline, " of ",
                              s->cinfo.output_height);
    s->err.damaged = true;
    return false;
  }
  jpeg_finish_decompress(&s->cinfo);
  return true;
}

struct JpegEncodeState {
  jpeg_compress_struct cinfo;
  JpegErrorManager err;
  // libjpeg's output buffer (jpeg_mem_dest): malloc'ed and grown by libjpeg, freed by the caller
  // of RunJpegEncode in every case.
  unsigned char* buffer = nullptr;
  unsigned long size = 0;  // NOLINT(runtime/int): jpeg_mem_dest's type.
  // Set once jpeg_mem_dest has returned: from then on its term_destination may be called.
  bool destination_set = false;
};

bool RunJpegEncode(const Tensor& image, int quality, JpegEncodeState* s, std::string* out) {
  s->cinfo.err = &s->err.pub;
  InstallErrorManager(&s->err);
  if (setjmp(s->err.jump)) return false;
  jpeg_create_compress(&s->cinfo);

  const int64_t height = image.shape()[0];
  const int64_t width = image.shape()[1];
  const int channels = static_cast<int>(image.shape()[2]);
  jpeg_mem_dest(&s->cinfo, &s->buffer, &s->size);
  s->destination_set = true;

  s->cinfo.image_width = static_cast<JDIMENSION>(width);
  s->cinfo.image_height = static_cast<JDIMENSION>(height);
  s->cinfo.input_components = channels;
  s->cinfo.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&s->cinfo);
  jpeg_set_quality(&s->cinfo, quality, TRUE);
  jpeg_start_compress(&s->cinfo, TRUE);
  const uint8_t* base = image.data<uint8_t>();
  const size_t stride = static_cast<size_t>(width) * channels;
  while (s->cinfo.next_scanline < s->cinfo.image_height) {
    // libjpeg does not write through the row pointer; its API is just not const-correct.
    JSAMPROW row = const_cast<uint8_t*>(base + s->cinfo.next_scanline * stride);
    jpeg_write_scanlines(&s->cinfo, &row, 1);
  }
  jpeg_finish_compress(&s->cinfo);
  // One copy of the compressed bytes (a fraction of the image's) into the string returned.
  out->assign(reinterpret_cast<const char*>(s->buffer), s->size);
  return true;
}

}  // namespace

ImageFormat SniffImageFormat(absl::string_view bytes) {
  if (StartsWith(bytes, kJpegMagic, sizeof(kJpegMagic))) return ImageFormat::kJpeg;
  if (StartsWith(bytes, kPngMagic, sizeof(kPngMagic))) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

std::string FirstBytesHex(absl::string_view bytes) {
  if (bytes.empty()) return "none";
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < 4; ++i) {
    absl::StrAppendFormat(&out, "%s%02X", i == 0 ? "" : " ", static_cast<uint8_t>(bytes[i]));
  }
  return out;
}

absl::StatusOr<Tensor> DecodeJpeg(absl::string_view bytes, int channels) {
  return DecodeJpegWindow(bytes, channels, nullptr);
}

int ScaledDecodeFactor(const CropWindow& window, const ScaledDecodeFloor& floor) {
  for (const int factor : {8, 4, 2}) {
    if (window.height >= factor * floor.height && window.width >= factor * floor.width) {
      return factor;
    }
  }
  return 1;
}

absl::StatusOr<Tensor> DecodeJpegWindow(absl::string_view bytes, int channels,
                                        const ChooseCropWindow& choose,
                                        std::optional<ScaledDecodeFloor> floor) {
  if (channels != 0 && channels != 1 && channels != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG channels must be 0 (as encoded), 1 or 3, got ", channels));
  }
  if (bytes.empty()) return absl::InvalidArgumentError("not a JPEG: the input is empty");
  const ImageFormat format = SniffImageFormat(bytes);
  if (format != ImageFormat::kJpeg) {
    return absl::InvalidArgumentError(absl::StrCat("not a JPEG",
                                                   format == ImageFormat::kPng ? " but a PNG" : "",
                                                   " (first bytes ", FirstBytesHex(bytes), ")"));
  }
  JpegDecodeState state{};
  if (choose) state.choose = &choose;
  if (floor.has_value()) state.floor = &*floor;
  Tensor image;
  const bool ok = RunJpegDecode(bytes, channels, &state, &image);
  jpeg_destroy_decompress(&state.cinfo);  // Safe on a zeroed or half-built struct.
  if (!ok && state.err.damaged) {
    return absl::DataLossError(
        absl::StrCat("damaged JPEG (", bytes.size(), " bytes): ", state.problem));
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid JPEG (", bytes.size(), " bytes): ", state.problem));
  }
  return image;
}

absl::StatusOr<Tensor> DecodePng(absl::string_view bytes, int channels) {
  if (channels < 0 || channels > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("PNG channels must be 0 (as encoded), 1, 2, 3 or 4, got ", channels));
  }
  if (bytes.empty()) return absl::InvalidArgumentError("not a PNG: the input is empty");
  const ImageFormat format = SniffImageFormat(bytes);
  if (format != ImageFormat::kPng) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a PNG", format == ImageFormat::kJpeg ? " but a JPEG" : "",
                     " (first bytes ", FirstBytesHex(bytes), ")"));
  }
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  // An error reading the header: not a valid PNG; reading the image data after it: damaged.
  auto fail = [&png, &bytes](bool header_read) {
    absl::Status status = header_read
                              ? absl::DataLossError(absl::StrCat("damaged PNG (", bytes.size(),
                                                                 " bytes): ", png.message))
                              : absl::InvalidArgumentError(absl::StrCat(
                                    "invalid PNG (", bytes.size(), " bytes): ", png.message));
    png_image_free(&png);
    return status;
  };
  if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size())) return fail(false);
  const int64_t height = png.height;
  const int64_t width = png.width;
  if (height * width > kMaxImagePixels) {
    png_image_free(&png);
    return TooLarge(height, width);
  }
  if (channels == 0) {
    // begin_read set png.format to the PNG's own layout (alpha also stands for tRNS).
    channels = ((png.format & PNG_FORMAT_FLAG_COLOR) ? 3 : 1) +
               ((png.format & PNG_FORMAT_FLAG_ALPHA) ? 1 : 0);
  }
  constexpr png_uint_32 kFormats[] = {0, PNG_FORMAT_GRAY, PNG_FORMAT_GA, PNG_FORMAT_RGB,
                                      PNG_FORMAT_RGBA};
  png.format = kFormats[channels];
  // Zero-filled, so alpha is composited onto black (background == nullptr composes onto the
  // buffer's contents).
  Tensor image(DT_UINT8, {height, width, channels});
  const png_int_32 stride = static_cast<png_int_32>(width * channels);
  if (!png_image_finish_read(&png, /*background=*/nullptr, image.data<uint8_t>(), stride,
                             /*colormap=*/nullptr)) {
    return fail(true);
  }
  png_image_free(&png);  // Already freed by finish_read; harmless.
  return image;
}

absl::StatusOr<Tensor> DecodeImage(absl::string_view bytes, int channels) {
  if (channels != 0 && channels != 1 && channels != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("image channels must be 0 (as encoded), 1 or 3, got ", channels));
  }
  switch (SniffImageFormat(bytes)) {
    case ImageFormat::kJpeg:
      return DecodeJpeg(bytes, channels);
    case ImageFormat::kPng:
      return DecodePng(bytes, channels);
    case ImageFormat::kUnknown:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("unsupported image format (first bytes ",
                                                 FirstBytesHex(bytes),
                                                 "): only JPEG and PNG are supported"));
}

absl::StatusOr<std::string> EncodeJpeg(const Tensor& image, int quality) {
  if (image.dtype() != DT_UINT8 || image.rank() != 3 ||
      (image.shape()[2] != 1 && image.shape()[2] != 3)) {
    return absl::InvalidArgumentError(absl::StrCat("EncodeJpeg: image is ", image.DebugString(),
                                                   ", need uint8[height,width,1 or 3]"));
  }
  if (image.shape()[0] <= 0 || image.shape()[1] <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("EncodeJpeg: image ", image.DebugString(), " is empty"));
  }
  if (image.shape()[0] > JPEG_MAX_DIMENSION || image.shape()[1] > JPEG_MAX_DIMENSION) {
    return absl::InvalidArgumentError(absl::StrCat("EncodeJpeg: image ", image.DebugString(),
                                                   " exceeds JPEG's maximum side of ",
                                                   JPEG_MAX_DIMENSION));
  }
  if (quality < 1 || quality > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("EncodeJpeg: quality must be in [1, 100], got ", quality));
  }
  JpegEncodeState state{};
  std::string out;
  const bool ok = RunJpegEncode(image, quality, &state, &out);
  // On an error libjpeg may have grown the buffer without telling state.buffer yet; its
  // term_destination tells (and does nothing else).
  if (!ok && state.destination_set) state.cinfo.dest->term_destination(&state.cinfo);
  jpeg_destroy_compress(&state.cinfo);
  std::free(state.buffer);
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("EncodeJpeg: libjpeg: ", state.err.message));
  }
  return out;
}

}  // namespace granary
