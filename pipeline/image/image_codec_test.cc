#include "pipeline/image/image_codec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

// clang-format off: jpeglib.h needs <cstdio> first.
#include <jpeglib.h>
// clang-format on
#include <png.h>

#include "common/hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/udfs/udf_test_util.h"

namespace granary::udf_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string CifarPng(int i) {
  const std::vector<std::string> records = ReadTestRecords("cifar10_png.tfrecord");
  EXPECT_EQ(records.size(), 4u);
  return i < static_cast<int>(records.size()) ? BytesFeature(records[i], "image/encoded") : "";
}

TEST(ImageCodecTest, SniffsFormatsByMagicBytes) {
  EXPECT_EQ(SniffImageFormat(ImagenetJpeg()), ImageFormat::kJpeg);
  EXPECT_EQ(SniffImageFormat(CifarPng(0)), ImageFormat::kPng);
  EXPECT_EQ(SniffImageFormat(GifBytes()), ImageFormat::kUnknown);
  EXPECT_EQ(SniffImageFormat(""), ImageFormat::kUnknown);
  EXPECT_EQ(SniffImageFormat("\xFF\xD8"), ImageFormat::kUnknown);  // Too short.
}

TEST(ImageCodecTest, FirstBytesHexShowsUpToFourBytes) {
  EXPECT_EQ(FirstBytesHex(GifBytes()), "47 49 46 38");
  EXPECT_EQ(FirstBytesHex("\x01"), "01");
  EXPECT_EQ(FirstBytesHex(""), "none");
}

TEST(ImageCodecTest, DecodesImagenetJpeg) {
  absl::StatusOr<Tensor> image = DecodeJpeg(ImagenetJpeg(), 3);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->dtype(), DT_UINT8);
  EXPECT_THAT(image->shape(), ElementsAre(480, 640, 3));
  // A real photograph: not all one value.
  const uint8_t* p = image->data<uint8_t>();
  EXPECT_NE(std::count(p, p + image->num_elements(), p[0]), image->num_elements());
}

TEST(ImageCodecTest, DecodesJpegToGrayscale) {
  absl::StatusOr<Tensor> rgb = DecodeJpeg(ImagenetJpeg(), 3);
  absl::StatusOr<Tensor> gray = DecodeJpeg(ImagenetJpeg(), 1);
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  ASSERT_TRUE(gray.ok()) << gray.status();
  EXPECT_THAT(gray->shape(), ElementsAre(480, 640, 1));
  // Gray is the luma of RGB, up to rounding and chroma upsampling.
  double sum = 0;
  for (int64_t i = 0; i < 480 * 640; ++i) {
    const uint8_t* px = rgb->data<uint8_t>() + 3 * i;
    const double luma = 0.299 * px[0] + 0.587 * px[1] + 0.114 * px[2];
    sum += std::abs(luma - gray->data<uint8_t>()[i]);
  }
  EXPECT_LT(sum / (480 * 640), 3.0);
}

TEST(ImageCodecTest, DecodesTutorialJpegsToTheirRecordedShapes) {
  const std::vector<std::string> records = ReadTestRecords("tutorial_images.tfrecord");
  ASSERT_EQ(records.size(), 2u);
  for (const std::string& record : records) {
    const int64_t height = Int64Feature(record, "height");
    const int64_t width = Int64Feature(record, "width");
    const int64_t depth = Int64Feature(record, "depth");
    absl::StatusOr<Tensor> image = DecodeJpeg(BytesFeature(record, "image_raw"), /*channels=*/0);
    ASSERT_TRUE(image.ok()) << image.status();
    EXPECT_THAT(image->shape(), ElementsAre(height, width, depth));
    // Asking for 3 channels converts a grayscale JPEG to RGB.
    absl::StatusOr<Tensor> rgb = DecodeJpeg(BytesFeature(record, "image_raw"), 3);
    ASSERT_TRUE(rgb.ok()) << rgb.status();
    EXPECT_THAT(rgb->shape(), ElementsAre(height, width, 3));
  }
}

TEST(ImageCodecTest, DecodesCifarPngs) {
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<Tensor> image = DecodePng(CifarPng(i), 3);
    ASSERT_TRUE(image.ok()) << image.status();
    EXPECT_THAT(image->shape(), ElementsAre(32, 32, 3));
  }
  absl::StatusOr<Tensor> native = DecodePng(CifarPng(0), 0);
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_EQ(native->shape()[2], 3);  // CIFAR PNGs are RGB without alpha.
}

TEST(ImageCodecTest, DecodesPngToRgbaWithOpaqueAlpha) {
  absl::StatusOr<Tensor> rgb = DecodePng(CifarPng(1), 3);
  absl::StatusOr<Tensor> rgba = DecodePng(CifarPng(1), 4);
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  ASSERT_TRUE(rgba.ok()) << rgba.status();
  EXPECT_THAT(rgba->shape(), ElementsAre(32, 32, 4));
  for (int64_t i = 0; i < 32 * 32; ++i) {
    for (int c = 0; c < 3; ++c) {
      ASSERT_EQ(rgba->data<uint8_t>()[4 * i + c], rgb->data<uint8_t>()[3 * i + c]);
    }
    ASSERT_EQ(rgba->data<uint8_t>()[4 * i + 3], 255);
  }
}

TEST(ImageCodecTest, DecodesRgbaPngKeepingOrCompositingAlpha) {
  // One opaque orange pixel, one fully transparent white pixel.
  const std::string png = EncodePng({255, 128, 0, 255, 255, 255, 255, 0}, 2, 1, PNG_FORMAT_RGBA);
  absl::StatusOr<Tensor> native = DecodePng(png, 0);
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_THAT(native->shape(), ElementsAre(1, 2, 4));
  const uint8_t* p = native->data<uint8_t>();
  EXPECT_THAT(std::vector<int>(p, p + 4), ElementsAre(255, 128, 0, 255));
  EXPECT_EQ(p[7], 0);  // The transparent pixel's alpha.

  absl::StatusOr<Tensor> rgb = DecodePng(png, 3);
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  p = rgb->data<uint8_t>();
  EXPECT_THAT(std::vector<int>(p, p + 6), ElementsAre(255, 128, 0, 0, 0, 0));  // Onto black.
}

TEST(ImageCodecTest, DecodesGrayAlphaPngAsEncoded) {
  const std::string png = EncodePng({10, 255, 20, 255, 30, 255}, 3, 1, PNG_FORMAT_GA);
  absl::StatusOr<Tensor> native = DecodePng(png, 0);
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_THAT(native->shape(), ElementsAre(1, 3, 2));
  absl::StatusOr<Tensor> gray = DecodeImage(png, 1);
  ASSERT_TRUE(gray.ok()) << gray.status();
  const uint8_t* p = gray->data<uint8_t>();
  EXPECT_THAT(std::vector<int>(p, p + 3), ElementsAre(10, 20, 30));
}

TEST(ImageCodecTest, DecodeImageDispatchesOnFormat) {
  absl::StatusOr<Tensor> jpeg = DecodeImage(ImagenetJpeg(), 3);
  ASSERT_TRUE(jpeg.ok()) << jpeg.status();
  EXPECT_THAT(jpeg->shape(), ElementsAre(480, 640, 3));
  absl::StatusOr<Tensor> png = DecodeImage(CifarPng(2), 1);
  ASSERT_TRUE(png.ok()) << png.status();
  EXPECT_THAT(png->shape(), ElementsAre(32, 32, 1));
}

TEST(ImageCodecTest, DecodingIsDeterministic) {
  absl::StatusOr<Tensor> a = DecodeJpeg(ImagenetJpeg(), 3);
  absl::StatusOr<Tensor> b = DecodeJpeg(ImagenetJpeg(), 3);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(*a == *b);
}

TEST(ImageCodecTest, DecodeImageRejectsGif) {
  absl::StatusOr<Tensor> image = DecodeImage(GifBytes(), 3);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(image.status().message(),
              HasSubstr("unsupported image format (first bytes 47 49 46 38): only JPEG and PNG "
                        "are supported"));
}

TEST(ImageCodecTest, DecodeJpegRejectsPng) {
  absl::StatusOr<Tensor> image = DecodeJpeg(CifarPng(0), 3);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(image.status().message(),
              HasSubstr("not a JPEG but a PNG (first bytes 89 50 4E 47)"));
}

TEST(ImageCodecTest, DecodePngRejectsJpeg) {
  absl::StatusOr<Tensor> image = DecodePng(ImagenetJpeg(), 3);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(image.status().message(), HasSubstr("not a PNG but a JPEG (first bytes FF D8 FF"));
}

TEST(ImageCodecTest, DecodeJpegRejectsEmptyInput) {
  absl::StatusOr<Tensor> image = DecodeJpeg("", 3);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(image.status().message(), HasSubstr("empty"));
}

TEST(ImageCodecTest, DecodeJpegReportsLibjpegErrorOnCorruptHeader) {
  // A JPEG signature followed by a bogus marker segment.
  const std::string corrupt("\xFF\xD8\xFF\x01\x02\x03garbage garbage garbage", 26);
  absl::StatusOr<Tensor> image = DecodeJpeg(corrupt, 3);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(image.status().message(), HasSubstr("invalid JPEG (26 bytes): "));
  // libjpeg's own message follows the prefix.
  EXPECT_GT(image.status().message().size(), std::string("invalid JPEG (26 bytes): ").size());
}

TEST(ImageCodecTest, DecodeJpegReportsLibjpegErrorOnHeaderOnly) {
  // Cut inside the header: libjpeg cannot find the image dimensions.
  const std::string truncated = ImagenetJpeg().substr(0, 20);
  absl::StatusOr<Tensor> image = DecodeJpeg(truncated, 3);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(image.status().message(), HasSubstr("invalid JPEG"));
}

// Damaged entropy-coded data is only a libjpeg warning, after which libjpeg fills the rest of
// the image with gray: that is data loss, not an image (issue 13, defect 9).
TEST(ImageCodecTest, DecodeJpegReportsTruncatedScanAsDataLoss) {
  const std::string jpeg = ImagenetJpeg();
  const std::string truncated = jpeg.substr(0, jpeg.size() / 2);
  absl::StatusOr<Tensor> image = DecodeJpeg(truncated, 3);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kDataLoss) << image.status();
  EXPECT_THAT(image.status().message(),
              HasSubstr(absl::StrCat("damaged JPEG (", truncated.size(),
                                     " bytes): Premature end of JPEG file")));
  EXPECT_EQ(DecodeImage(truncated, 3).status().code(), absl::StatusCode::kDataLoss);
}

TEST(ImageCodecTest, DecodeJpegReportsGarbageInTheScanAsDataLoss) {
  const std::string jpeg = ImagenetJpeg();
  // The entropy-coded data starts after the SOS segment (FF DA, then its 2-byte length).
  const size_t sos = jpeg.find("\xFF\xDA");
  ASSERT_NE(sos, std::string::npos);
  const size_t scan =
      sos + 2 + ((static_cast<uint8_t>(jpeg[sos + 2]) << 8) | static_cast<uint8_t>(jpeg[sos + 3]));
  ASSERT_LT(scan + 1000, jpeg.size() - 2);
  for (const uint32_t seed : {1u, 2u, 3u}) {
    std::string damaged = jpeg;
    std::mt19937 rng(seed);
    const size_t at = scan + (jpeg.size() - 2 - scan) / 3;
    for (size_t i = at; i < at + 64; ++i) damaged[i] = static_cast<char>(rng() & 0xFF);
    absl::StatusOr<Tensor> image = DecodeJpeg(damaged, 3);
    EXPECT_EQ(image.status().code(), absl::StatusCode::kDataLoss)
        << "seed " << seed << ": " << image.status();
    EXPECT_THAT(image.status().message(), HasSubstr("damaged JPEG")) << "seed " << seed;
  }
}

TEST(ImageCodecTest, DecodePngReportsLibpngErrorOnCorruptData) {
  std::string png = CifarPng(0);
  // Damage the IHDR chunk (bytes 8..32) so that its CRC no longer matches.
  png[20] ^= 0x55;
  absl::StatusOr<Tensor> image = DecodePng(png, 3);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(image.status().message(), HasSubstr("invalid PNG (3172 bytes): "));
}

TEST(ImageCodecTest, DecodePngReportsTruncation) {
  // Cut after the header: the image data is damaged.
  absl::StatusOr<Tensor> image = DecodePng(CifarPng(0).substr(0, 100), 3);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(image.status().message(), HasSubstr("damaged PNG (100 bytes)"));
  // Cut inside the header: no valid PNG.
  image = DecodePng(CifarPng(0).substr(0, 20), 3);
  EXPECT_EQ(image.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(image.status().message(), HasSubstr("invalid PNG (20 bytes)"));
}

// Damage in a PNG's image data (after a valid header) is DataLoss, like a damaged JPEG's.
TEST(ImageCodecTest, DecodePngReportsDamagedImageDataAsDataLoss) {
  const std::string png = CifarPng(0);
  const size_t idat = png.find("IDAT");
  ASSERT_NE(idat, std::string::npos);
  const std::string truncated = png.substr(0, idat + (png.size() - idat) / 2);
  std::string flipped = png;
  flipped[idat + 40] ^= 0x10;  // Inside the IDAT data: its CRC no longer matches.
  for (const std::string& damaged : {truncated, flipped}) {
    absl::StatusOr<Tensor> image = DecodePng(damaged, 3);
    EXPECT_EQ(image.status().code(), absl::StatusCode::kDataLoss) << image.status();
    EXPECT_THAT(image.status().message(),
                HasSubstr(absl::StrCat("damaged PNG (", damaged.size(), " bytes): ")));
    EXPECT_EQ(DecodeImage(damaged, 3).status().code(), absl::StatusCode::kDataLoss);
  }
}

TEST(ImageCodecTest, RejectsUnsupportedChannelCounts) {
  EXPECT_THAT(DecodeJpeg(ImagenetJpeg(), 2).status().message(),
              HasSubstr("JPEG channels must be 0 (as encoded), 1 or 3, got 2"));
  EXPECT_THAT(DecodePng(CifarPng(0), 5).status().message(),
              HasSubstr("PNG channels must be 0 (as encoded), 1, 2, 3 or 4, got 5"));
  EXPECT_THAT(DecodeImage(CifarPng(0), 4).status().message(),
              HasSubstr("image channels must be 0 (as encoded), 1 or 3, got 4"));
}

TEST(ImageCodecTest, EncodeJpegRoundTripPreservesShapeAndPixels) {
  const Tensor original = GradientImage(48, 64);
  absl::StatusOr<std::string> jpeg = EncodeJpeg(original, 95);
  ASSERT_TRUE(jpeg.ok()) << jpeg.status();
  EXPECT_EQ(SniffImageFormat(*jpeg), ImageFormat::kJpeg);
  absl::StatusOr<Tensor> decoded = DecodeJpeg(*jpeg, 3);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_THAT(decoded->shape(), ElementsAre(48, 64, 3));
  EXPECT_LT(MeanAbsDiff(original, *decoded), 2.0);
}

TEST(ImageCodecTest, EncodeJpegRoundTripOfTheImagenetFixture) {
  // The fixture's pixels are close to noise (neighbouring values differ by ~59 on average), the
  // worst case for JPEG; the bound still catches swapped channels or misaligned rows (~85).
  absl::StatusOr<Tensor> photo = DecodeJpeg(ImagenetJpeg(), 3);
  ASSERT_TRUE(photo.ok()) << photo.status();
  absl::StatusOr<std::string> jpeg = EncodeJpeg(*photo, 90);
  ASSERT_TRUE(jpeg.ok()) << jpeg.status();
  absl::StatusOr<Tensor> decoded = DecodeJpeg(*jpeg, 3);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_THAT(decoded->shape(), ElementsAre(480, 640, 3));
  EXPECT_LT(MeanAbsDiff(*photo, *decoded), 12.0);
}

TEST(ImageCodecTest, EncodeJpegRoundTripAtBenchmarkSize) {
  const Tensor original = GradientImage(224, 224);
  absl::StatusOr<std::string> jpeg = EncodeJpeg(original, 90);
  ASSERT_TRUE(jpeg.ok()) << jpeg.status();
  absl::StatusOr<Tensor> decoded = DecodeJpeg(*jpeg, 3);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_THAT(decoded->shape(), ElementsAre(224, 224, 3));
  EXPECT_LT(MeanAbsDiff(original, *decoded), 2.0);
}

TEST(ImageCodecTest, EncodeJpegGrayscaleRoundTrip) {
  Tensor gray(DT_UINT8, {17, 33, 1});  // Odd sizes: partial MCUs.
  for (int64_t i = 0; i < gray.num_elements(); ++i) gray.data<uint8_t>()[i] = (i * 3) % 200;
  absl::StatusOr<std::string> jpeg = EncodeJpeg(gray, 100);
  ASSERT_TRUE(jpeg.ok()) << jpeg.status();
  absl::StatusOr<Tensor> decoded = DecodeJpeg(*jpeg, 0);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_THAT(decoded->shape(), ElementsAre(17, 33, 1));
  EXPECT_LT(MeanAbsDiff(gray, *decoded), 3.0);
}

TEST(ImageCodecTest, EncodeJpegIsDeterministicAndQualityMatters) {
  const Tensor image = GradientImage(64, 64);
  absl::StatusOr<std::string> a = EncodeJpeg(image, 75);
  absl::StatusOr<std::string> b = EncodeJpeg(image, 75);
  absl::StatusOr<std::string> low = EncodeJpeg(image, 10);
  ASSERT_TRUE(a.ok() && b.ok() && low.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_LT(low->size(), a->size());
}

TEST(ImageCodecTest, EncodeJpegGrowsItsBufferForLargeImages) {
  // Noise compresses badly, so the output outgrows the initial buffer.
  Tensor noise(DT_UINT8, {256, 256, 3});
  uint32_t state = 12345;
  for (int64_t i = 0; i < noise.num_elements(); ++i) {
    state = state * 1664525u + 1013904223u;
    noise.data<uint8_t>()[i] = static_cast<uint8_t>(state >> 24);
  }
  absl::StatusOr<std::string> jpeg = EncodeJpeg(noise, 100);
  ASSERT_TRUE(jpeg.ok()) << jpeg.status();
  EXPECT_GT(jpeg->size(), noise.content().size() / 8);
  absl::StatusOr<Tensor> decoded = DecodeJpeg(*jpeg, 3);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_THAT(decoded->shape(), ElementsAre(256, 256, 3));
}

// The encoder's bytes for fixed images, pinned by their xxh64: a change of how the output is
// buffered (or of libjpeg's settings) must not change a single byte, since cached and recomputed
// elements are compared byte for byte.
TEST(ImageCodecTest, EncodeJpegBytesOfFixedImagesAreStable) {
  Tensor noise(DT_UINT8, {256, 256, 3});  // Outgrows any small initial buffer.
  uint32_t state = 12345;
  for (int64_t i = 0; i < noise.num_elements(); ++i) {
    state = state * 1664525u + 1013904223u;
    noise.data<uint8_t>()[i] = static_cast<uint8_t>(state >> 24);
  }
  Tensor gray(DT_UINT8, {17, 33, 1});
  for (int64_t i = 0; i < gray.num_elements(); ++i) gray.data<uint8_t>()[i] = (i * 3) % 200;
  const struct {
    const char* name;
    Tensor image;
    int quality;
    const char* xxh64;
  } cases[] = {
      {"gradient 64x64 q75", GradientImage(64, 64), 75, "ac49719b1ccbefb1"},
      {"gray 17x33 q100", gray, 100, "5f6a663429332dae"},
      {"noise 256x256 q100", noise, 100, "e277679482236332"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<std::string> jpeg = EncodeJpeg(c.image, c.quality);
    ASSERT_TRUE(jpeg.ok()) << c.name << ": " << jpeg.status();
    EXPECT_EQ(HashToHex(Hash64(*jpeg)), c.xxh64) << c.name << " (" << jpeg->size() << " bytes)";
  }
}

TEST(ImageCodecTest, EncodeJpegRejectsNonUint8) {
  EXPECT_THAT(EncodeJpeg(Tensor(DT_FLOAT, {4, 4, 3}), 90).status().message(),
              HasSubstr("EncodeJpeg: image is float32[4,4,3], need uint8[height,width,1 or 3]"));
}

TEST(ImageCodecTest, EncodeJpegRejectsWrongRankOrChannels) {
  EXPECT_THAT(EncodeJpeg(Tensor(DT_UINT8, {4, 4}), 90).status().message(),
              HasSubstr("image is uint8[4,4]"));
  EXPECT_THAT(EncodeJpeg(Tensor(DT_UINT8, {4, 4, 4}), 90).status().message(),
              HasSubstr("image is uint8[4,4,4]"));
}

TEST(ImageCodecTest, EncodeJpegRejectsEmptyImage) {
  EXPECT_THAT(EncodeJpeg(Tensor(DT_UINT8, {0, 4, 3}), 90).status().message(),
              HasSubstr("is empty"));
}

TEST(ImageCodecTest, EncodeJpegRejectsBadQuality) {
  EXPECT_THAT(EncodeJpeg(Tensor(DT_UINT8, {4, 4, 3}), 0).status().message(),
              HasSubstr("quality must be in [1, 100], got 0"));
  EXPECT_THAT(EncodeJpeg(Tensor(DT_UINT8, {4, 4, 3}), 101).status().message(),
              HasSubstr("got 101"));
}

// Writes an Adobe CMYK JPEG whose every pixel stores `cmyk` (Adobe's inverted convention:
// 255 = no ink), straight through libjpeg.
std::string CmykJpeg(int height, int width, const uint8_t cmyk[4]) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.input_components = 4;
  cinfo.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&cinfo);
  jpeg_set_colorspace(&cinfo, JCS_CMYK);  // Writes an Adobe marker.
  jpeg_set_quality(&cinfo, 100, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  std::vector<uint8_t> row(width * 4);
  for (int x = 0; x < width; ++x) std::copy(cmyk, cmyk + 4, row.begin() + 4 * x);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&cinfo, &r, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string out(reinterpret_cast<char*>(buffer), size);
  std::free(buffer);
  return out;
}

TEST(ImageCodecTest, DecodesAdobeCmykJpegToRgbAndGray) {
  // Inverted CMYK (255, 0, 0, 255): no cyan, full magenta and yellow, no black -> red.
  const uint8_t red[4] = {255, 0, 0, 255};
  const std::string jpeg = CmykJpeg(16, 16, red);
  absl::StatusOr<Tensor> rgb = DecodeJpeg(jpeg, 3);
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  EXPECT_THAT(rgb->shape(), ElementsAre(16, 16, 3));
  EXPECT_NEAR(rgb->data<uint8_t>()[0], 255, 3);
  EXPECT_NEAR(rgb->data<uint8_t>()[1], 0, 3);
  EXPECT_NEAR(rgb->data<uint8_t>()[2], 0, 3);

  absl::StatusOr<Tensor> native = DecodeJpeg(jpeg, 0);
  ASSERT_TRUE(native.ok()) << native.status();
  EXPECT_THAT(native->shape(), ElementsAre(16, 16, 3));

  absl::StatusOr<Tensor> gray = DecodeJpeg(jpeg, 1);
  ASSERT_TRUE(gray.ok()) << gray.status();
  EXPECT_THAT(gray->shape(), ElementsAre(16, 16, 1));
  EXPECT_NEAR(gray->data<uint8_t>()[0], 76, 3);  // Luma of pure red: 0.299 * 255.
}

}  // namespace
}  // namespace granary::udf_test
