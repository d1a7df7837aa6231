// Tests of the decode-crop fusion (decode_crop_fusion.h) and of DecodeJpegWindow: the fused
// decode gives byte for byte what decoding the whole image and cropping gives, with the same
// errors, on random images, windows and keys (seeds in the failure messages).
#include "pipeline/udfs/decode_crop_fusion.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/image/image_codec.h"
#include "pipeline/image/image_crop.h"
#include "pipeline/ops/udf_invoker.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/udfs/udf_test_util.h"

namespace granary::udf_test {
namespace {

using ::testing::HasSubstr;

constexpr RegisteredUdf kDecodeJpeg = {RegisterDecodeImageUdfs, "decode_jpeg"};
constexpr RegisteredUdf kDecodeImage = {RegisterDecodeImageUdfs, "decode_image"};
constexpr RegisteredUdf kRandomCrop = {RegisterRandomCropUdf, "random_crop"};
constexpr RegisteredUdf kRandomResizedCrop = {RegisterRandomResizedCropUdf, "random_resized_crop"};

// A photo-like image: smooth gradients plus noise, so that JPEG's chroma and detail matter.
Tensor NoisyImage(int64_t h, int64_t w, int64_t c, std::mt19937_64& rng) {
  Tensor t(DT_UINT8, {h, w, c});
  uint8_t* p = t.data<uint8_t>();
  std::uniform_int_distribution<int> noise(-40, 40);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) {
        const int v = static_cast<int>((y * 255) / h + (x * 3 + ch * 80) % 256) / 2 + noise(rng);
        *p++ = static_cast<uint8_t>(std::clamp(v, 0, 255));
      }
    }
  }
  return t;
}

std::string Jpeg(const Tensor& image, int quality) {
  absl::StatusOr<std::string> jpeg = EncodeJpeg(image, quality);
  EXPECT_TRUE(jpeg.ok()) << jpeg.status();
  return jpeg.ok() ? *jpeg : "";
}

// DecodeJpegWindow of `window` against DecodeJpeg then CropImage.
void ExpectWindowMatches(const std::string& jpeg, int channels, const CropWindow& window,
                         const std::string& what) {
  absl::StatusOr<Tensor> whole = DecodeJpeg(jpeg, channels);
  ASSERT_TRUE(whole.ok()) << what << ": " << whole.status();
  const Tensor expected = CropImage(*whole, window);
  absl::StatusOr<Tensor> part =
      DecodeJpegWindow(jpeg, channels, [&](int64_t, int64_t) { return window; });
  ASSERT_TRUE(part.ok()) << what << ": " << part.status();
  EXPECT_EQ(part->DebugString(), expected.DebugString()) << what;
  EXPECT_TRUE(*part == expected) << what;
}

TEST(DecodeJpegWindowTest, RandomWindowsOfRandomImagesMatchDecodeThenCrop) {
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 60; ++i) {
    const int64_t h = std::uniform_int_distribution<int64_t>(1, 200)(rng);
    const int64_t w = std::uniform_int_distribution<int64_t>(1, 200)(rng);
    const int64_t c = i % 3 == 0 ? 1 : 3;
    const int quality = std::uniform_int_distribution<int>(30, 98)(rng);
    const std::string jpeg = Jpeg(NoisyImage(h, w, c, rng), quality);
    for (int j = 0; j < 5; ++j) {
      CropWindow win;
      win.height = std::uniform_int_distribution<int64_t>(1, h)(rng);
      win.width = std::uniform_int_distribution<int64_t>(1, w)(rng);
      win.y = std::uniform_int_distribution<int64_t>(0, h - win.height)(rng);
      win.x = std::uniform_int_distribution<int64_t>(0, w - win.width)(rng);
      const int channels = std::array<int, 3>{0, 1, 3}[j % 3];
      ExpectWindowMatches(jpeg, channels, win,
                          "seed " + std::to_string(seed) + " image " + std::to_string(i) +
                              " window " + std::to_string(j));
    }
  }
}

TEST(DecodeJpegWindowTest, WindowsOnIMcuBoundariesAndAtTheEdgesMatch) {
  // A real photo (480x640, 4:2:0): windows starting and ending on 16-pixel iMCU boundaries, one
  // pixel either side of them, and touching each edge of the image.
  const std::string jpeg = ImagenetJpeg();
  for (const CropWindow& win :
       {CropWindow{0, 0, 16, 16}, CropWindow{16, 16, 32, 32}, CropWindow{15, 15, 18, 18},
        CropWindow{17, 17, 14, 14}, CropWindow{0, 0, 480, 1}, CropWindow{0, 639, 480, 1},
        CropWindow{479, 0, 1, 640}, CropWindow{464, 624, 16, 16}, CropWindow{100, 200, 224, 224},
        CropWindow{1, 1, 478, 638}, CropWindow{0, 0, 20, 2}, CropWindow{0, 1, 20, 1},
        CropWindow{5, 638, 20, 2}}) {
    ExpectWindowMatches(
        jpeg, 3, win,
        absl::StrCat("window ", win.height, "x", win.width, " at (", win.y, ", ", win.x, ")"));
  }
}

TEST(DecodeJpegWindowTest, ADamagedImageFailsAsTheWholeDecodeFails) {
  // Truncated in its image data below any window: the fused decode still reads to the end.
  const std::string jpeg = ImagenetJpeg();
  const std::string truncated = jpeg.substr(0, jpeg.size() * 3 / 4);
  const absl::Status whole = DecodeJpeg(truncated, 3).status();
  ASSERT_TRUE(absl::IsDataLoss(whole)) << whole;
  const absl::Status part = DecodeJpegWindow(truncated, 3, [](int64_t, int64_t) {
                              return CropWindow{0, 0, 16, 16};
                            }).status();
  EXPECT_EQ(part, whole);
  // A window outside the image is refused, naming both.
  EXPECT_THAT(DecodeJpegWindow(jpeg, 3,
                               [](int64_t, int64_t) {
                                 return CropWindow{470, 0, 20, 20};
                               })
                  .status()
                  .message(),
              HasSubstr("the window of 20x20 at (470, 0) is not inside the image of 480x640"));
}

TEST(DecodeJpegWindowTest, TheScaleIsTheLargestThatKeepsTheWindowAtLeastTheFloor) {
  EXPECT_EQ(ScaledDecodeFactor({0, 0, 447, 1000}, {224, 224}), 1);
  EXPECT_EQ(ScaledDecodeFactor({0, 0, 448, 448}, {224, 224}), 2);
  EXPECT_EQ(ScaledDecodeFactor({0, 0, 895, 2000}, {224, 224}), 2);
  EXPECT_EQ(ScaledDecodeFactor({0, 0, 896, 896}, {224, 224}), 4);
  EXPECT_EQ(ScaledDecodeFactor({0, 0, 1792, 1792}, {224, 224}), 8);
  EXPECT_EQ(ScaledDecodeFactor({0, 0, 100000, 100000}, {224, 224}), 8);  // 1/8 at most
  EXPECT_EQ(ScaledDecodeFactor({0, 0, 64, 30}, {16, 8}), 2);
}

TEST(DecodeJpegWindowTest, AScaledWindowIsThatWindowOfTheImageDecodedSmaller) {
  // The photo (480x640) decoded whole at 1/2 (a floor of half its size), in color and in gray,
  // and windows of it decoded at 1/2: each is its window of the smaller image, halved and
  // rounded outwards.
  const std::string jpeg = ImagenetJpeg();
  const auto whole = [](int64_t, int64_t) { return std::optional<CropWindow>(); };
  for (const int channels : {3, 1}) {
    absl::StatusOr<Tensor> half =
        DecodeJpegWindow(jpeg, channels, whole, ScaledDecodeFloor{240, 320});
    ASSERT_TRUE(half.ok()) << half.status();
    EXPECT_EQ(half->DebugString(), absl::StrCat("uint8[240,320,", channels, "]"));
    for (const CropWindow& win : {CropWindow{100, 200, 300, 400}, CropWindow{0, 0, 480, 640},
                                  CropWindow{33, 77, 201, 333}, CropWindow{279, 1, 201, 639}}) {
      const std::string what = absl::StrCat("window ", win.height, "x", win.width, " at (", win.y,
                                            ", ", win.x, "), ", channels, " channels");
      absl::StatusOr<Tensor> part = DecodeJpegWindow(
          jpeg, channels, [&](int64_t, int64_t) { return win; },
          ScaledDecodeFloor{win.height / 2, win.width / 2});  // scaled by 2, not 4
      ASSERT_TRUE(part.ok()) << what << ": " << part.status();
      const CropWindow scaled{win.y / 2, win.x / 2, (win.y + win.height + 1) / 2 - win.y / 2,
                              (win.x + win.width + 1) / 2 - win.x / 2};
      EXPECT_TRUE(*part == CropImage(*half, scaled)) << what;
    }
  }
}

// `image` (uint8 [h, w, c], h and w multiples of `factor`) scaled down by `factor`, each pixel
// the rounded mean of its factor x factor block: the average the reduced inverse DCT computes.
Tensor BoxDownscale(const Tensor& image, int64_t factor) {
  const int64_t h = image.shape()[0] / factor, w = image.shape()[1] / factor;
  const int64_t c = image.shape()[2];
  Tensor out(DT_UINT8, {h, w, c});
  const uint8_t* in = image.data<uint8_t>();
  uint8_t* o = out.data<uint8_t>();
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) {
        int sum = 0;
        for (int64_t dy = 0; dy < factor; ++dy) {
          for (int64_t dx = 0; dx < factor; ++dx) {
            sum += in[((y * factor + dy) * image.shape()[1] + x * factor + dx) * c + ch];
          }
        }
        const int n = static_cast<int>(factor * factor);
        o[(y * w + x) * c + ch] = static_cast<uint8_t>((sum + n / 2) / n);
      }
    }
  }
  return out;
}

// The mean absolute difference between `jpeg`'s `window` decoded scaled down by `factor` and
// the exact window's pixels averaged in blocks of factor x factor.
double ScaledAgainstAveraged(const std::string& jpeg, const CropWindow& window, int64_t factor) {
  const auto choose = [&](int64_t, int64_t) { return window; };
  absl::StatusOr<Tensor> exact = DecodeJpegWindow(jpeg, 3, choose);
  absl::StatusOr<Tensor> scaled = DecodeJpegWindow(
      jpeg, 3, choose, ScaledDecodeFloor{window.height / factor, window.width / factor});
  EXPECT_TRUE(exact.ok() && scaled.ok()) << exact.status() << " " << scaled.status();
  if (!exact.ok() || !scaled.ok()) return 255;
  return MeanAbsDiff(*scaled, BoxDownscale(*exact, factor));
}

TEST(DecodeJpegWindowTest, AScaledWindowIsTheExactWindowAveragedWhereTheImageIsSmooth) {
  // Smooth content (no detail the reduced inverse DCT drops): decoding at 1/2, 1/4 and 1/8
  // loses nothing but rounding — the window's place and colors are right.
  const std::string jpeg = Jpeg(GradientImage(480, 640), 95);
  for (const int64_t factor : {2, 4, 8}) {
    EXPECT_LT(ScaledAgainstAveraged(jpeg, CropWindow{16, 32, 448, 576}, factor), 1.0)
        << "1/" << factor;
  }
}

TEST(DecodeJpegWindowTest, AScaledWindowOfAPhotoLosesOnlyItsFinestDetail) {
  // A real photo's fine texture is what the reduced inverse DCT drops and a block average keeps;
  // measured here 13.8 levels (of 255) on average at 1/2 and 4.0 at 1/4: a blurrier window, not
  // another picture.
  const std::string jpeg = ImagenetJpeg();
  for (const int64_t factor : {2, 4}) {
    const double difference = ScaledAgainstAveraged(jpeg, CropWindow{16, 32, 448, 576}, factor);
    EXPECT_LT(difference, 16.0) << "1/" << factor;
    EXPECT_GT(difference, 0.0) << "1/" << factor << ": scaled is approximate, not the same path";
  }
}

// The UDFs built from `decode` and `crop`, run fused and one after the other on the one tensor
// `input` with the given keys.
struct FusedAndUnfused {
  absl::Status fused;
  bool crop_failed = false;
  Element fused_out;
  absl::Status unfused;
  Element unfused_out;
};

FusedAndUnfused RunBoth(const RegisteredUdf& decode, const std::string& decode_params,
                        const RegisteredUdf& crop, const std::string& crop_params, Tensor input,
                        uint64_t decode_key, uint64_t crop_key) {
  FusedAndUnfused r;
  absl::StatusOr<std::unique_ptr<Udf>> d = MakeUdf(decode, decode_params);
  absl::StatusOr<std::unique_ptr<Udf>> c = MakeUdf(crop, crop_params);
  EXPECT_TRUE(d.ok() && c.ok());
  if (!d.ok() || !c.ok()) return r;
  EXPECT_TRUE(FusesDecodeCrop(**d, **c));
  r.fused_out = MakeElement({input});
  r.fused =
      RunDecodeCrop(**d, UdfCall{decode_key}, **c, UdfCall{crop_key}, r.fused_out, &r.crop_failed);
  r.unfused_out = MakeElement({input});
  r.unfused = (*d)->Map(r.unfused_out, UdfCall{decode_key});
  if (r.unfused.ok()) r.unfused = (*c)->Map(r.unfused_out, UdfCall{crop_key});
  return r;
}

TEST(DecodeCropFusionTest, FusedEqualsUnfusedForBothCropsAndBothDecoders) {
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  const std::string photo = ImagenetJpeg();
  for (int i = 0; i < 40; ++i) {
    const uint64_t key = rng();
    const bool resized = i % 2 == 0;
    const FusedAndUnfused r = RunBoth(
        i % 4 < 2 ? kDecodeJpeg : kDecodeImage, "{}", resized ? kRandomResizedCrop : kRandomCrop,
        resized ? R"({"height": 224, "width": 224})" : R"({"height": 224, "width": 300})",
        Tensor::String(photo), rng(), key);
    ASSERT_TRUE(r.fused.ok()) << "seed " << seed << " case " << i << ": " << r.fused;
    ASSERT_TRUE(r.unfused.ok()) << "seed " << seed << " case " << i << ": " << r.unfused;
    EXPECT_TRUE(r.fused_out.tensors == r.unfused_out.tensors) << "seed " << seed << " case " << i;
  }
}

TEST(DecodeCropFusionTest, APngThroughDecodeImageIsDecodedWholeAndCropped) {
  const Tensor pattern = PatternImage(40, 50, 3);
  const std::string png = EncodePng(Values<uint8_t>(pattern), 50, 40, PNG_FORMAT_RGB);
  const FusedAndUnfused r = RunBoth(kDecodeImage, "{}", kRandomResizedCrop,
                                    R"({"height": 16, "width": 16})", Tensor::String(png), 1, 2);
  ASSERT_TRUE(r.fused.ok()) << r.fused;
  EXPECT_TRUE(r.fused_out.tensors == r.unfused_out.tensors);
  EXPECT_EQ(r.fused_out.tensors[0].DebugString(), "uint8[16,16,3]");
}

TEST(DecodeCropFusionTest, AGrayscaleDecodeFusesToo) {
  absl::StatusOr<Tensor> photo = DecodeJpeg(ImagenetJpeg(), 3);
  ASSERT_TRUE(photo.ok());
  const FusedAndUnfused r =
      RunBoth(kDecodeJpeg, R"({"channels": 1})", kRandomResizedCrop,
              R"({"height": 64, "width": 64})", Tensor::String(Jpeg(*photo, 90)), 1, 2);
  ASSERT_TRUE(r.fused.ok()) << r.fused;
  EXPECT_TRUE(r.fused_out.tensors == r.unfused_out.tensors);
  EXPECT_EQ(r.fused_out.tensors[0].DebugString(), "uint8[64,64,1]");
}

TEST(DecodeCropFusionTest, ErrorsAreTheUnfusedOnesAndSayWhoseTheyAre) {
  const std::string photo = ImagenetJpeg();
  // A crop larger than the image: the crop's error.
  FusedAndUnfused r = RunBoth(kDecodeJpeg, "{}", kRandomCrop, R"({"height": 500, "width": 10})",
                              Tensor::String(photo), 1, 2);
  EXPECT_EQ(r.fused, r.unfused);
  EXPECT_TRUE(r.crop_failed);
  EXPECT_THAT(r.fused.message(), HasSubstr("random_crop: image 480x640 is smaller"));
  // A damaged image: the decode's error, even where the crop would also fail.
  const std::string truncated = photo.substr(0, photo.size() / 2);
  r = RunBoth(kDecodeJpeg, "{}", kRandomCrop, R"({"height": 500, "width": 10})",
              Tensor::String(truncated), 1, 2);
  EXPECT_EQ(r.fused, r.unfused);
  EXPECT_FALSE(r.crop_failed);
  EXPECT_TRUE(absl::IsDataLoss(r.fused)) << r.fused;
  // Not an image at all, and not a string scalar: the decode's errors.
  r = RunBoth(kDecodeImage, "{}", kRandomCrop, R"({"height": 5, "width": 5})",
              Tensor::String(GifBytes()), 1, 2);
  EXPECT_EQ(r.fused, r.unfused);
  EXPECT_FALSE(r.crop_failed);
  r = RunBoth(kDecodeJpeg, "{}", kRandomCrop, R"({"height": 5, "width": 5})",
              Tensor::Scalar<int64_t>(3), 1, 2);
  EXPECT_EQ(r.fused, r.unfused);
  EXPECT_FALSE(r.crop_failed);
}

TEST(DecodeCropFusionTest, OnlyADecodeFollowedByACropOfItsTensorFuses) {
  const auto make = [](const RegisteredUdf& udf, const std::string& params) {
    absl::StatusOr<std::unique_ptr<Udf>> made = MakeUdf(udf, params);
    EXPECT_TRUE(made.ok()) << made.status();
    return std::shared_ptr<const Udf>(std::move(*made));
  };
  const auto decode = make(kDecodeJpeg, "{}");
  EXPECT_TRUE(FusesDecodeCrop(*decode, *make(kRandomCrop, R"({"fraction": 0.5})")));
  EXPECT_FALSE(FusesDecodeCrop(*decode, *make(kRandomCrop, R"({"fraction": 0.5, "index": 1})")));
  EXPECT_FALSE(FusesDecodeCrop(*make(kRandomCrop, R"({"fraction": 0.5})"), *decode));
  EXPECT_FALSE(FusesDecodeCrop(
      *decode, *make({RegisterResizeUdf, "resize"}, R"({"height": 4, "width": 4})")));
}

TEST(DecodeCropFusionTest, InvokeMapUdfsRunsAMarkedPairFusedAndLabelsTheCropsError) {
  const auto make = [](const RegisteredUdf& udf, const std::string& params) {
    absl::StatusOr<std::unique_ptr<Udf>> made = MakeUdf(udf, params);
    EXPECT_TRUE(made.ok()) << made.status();
    return std::shared_ptr<const Udf>(std::move(*made));
  };
  std::vector<OpBuildArgs> chain(2);
  chain[0].udf = make(kDecodeJpeg, "{}");
  chain[0].op_index = 0;
  chain[0].label = "op 0 (map, udf 'decode_jpeg')";
  chain[1].udf = make(kRandomResizedCrop, R"({"height": 32, "width": 32})");
  chain[1].op_index = 1;
  chain[1].label = "op 1 (map, udf 'random_resized_crop')";
  chain[0].ctx.seed = 99;
  chain[1].ctx.seed = 99;
  Element unfused = MakeElement({Tensor::String(ImagenetJpeg())});
  ASSERT_TRUE(InvokeMapUdfs(chain, unfused).ok());
  chain[0].decode_crop_with_next = true;
  Element fused = MakeElement({Tensor::String(ImagenetJpeg())});
  ASSERT_TRUE(InvokeMapUdfs(chain, fused).ok());
  EXPECT_TRUE(fused.tensors == unfused.tensors) << "the crop keeps its own op's random key";
  // A crop that fails is labelled with its own op.
  chain[1].udf = make(kRandomCrop, R"({"height": 481, "width": 1})");
  chain[1].label = "op 1 (map, udf 'random_crop')";
  Element bad = MakeElement({Tensor::String(ImagenetJpeg())});
  EXPECT_THAT(InvokeMapUdfs(chain, bad).message(), HasSubstr("op 1 (map, udf 'random_crop')"));
}

TEST(DecodeCropFusionTest, DctScalingIsOptInDeterministicAndOnlyForLargeWindows) {
  const std::string photo = ImagenetJpeg();  // 480x640
  const auto run = [&](const std::string& crop_params, uint64_t key) {
    return RunBoth(kDecodeJpeg, "{}", kRandomResizedCrop, crop_params, Tensor::String(photo), 1,
                   key);
  };
  // An output of 64x64: a window of at least 128x128 — nearly every draw — is decoded scaled.
  const std::string scaled = R"({"height": 64, "width": 64, "dct_scaling": true})";
  const std::string exact = R"({"height": 64, "width": 64})";
  int differing = 0;
  for (uint64_t key = 1; key <= 20; ++key) {
    const FusedAndUnfused a = run(scaled, key);
    const FusedAndUnfused b = run(scaled, key);
    const FusedAndUnfused off = run(exact, key);
    ASSERT_TRUE(a.fused.ok() && a.unfused.ok() && off.fused.ok()) << "key " << key;
    EXPECT_TRUE(a.fused_out.tensors == b.fused_out.tensors) << "key " << key << ": not repeatable";
    EXPECT_EQ(a.fused_out.tensors[0].DebugString(), "uint8[64,64,3]");
    // Unfused, dct_scaling changes nothing; and off, fused equals unfused (exact).
    EXPECT_TRUE(a.unfused_out.tensors == off.fused_out.tensors) << "key " << key;
    EXPECT_TRUE(off.fused_out.tensors == off.unfused_out.tensors) << "key " << key;
    differing += !(a.fused_out.tensors == off.fused_out.tensors);
  }
  EXPECT_GT(differing, 10) << "dct_scaling should have scaled most of these windows";
  // An output as large as the photo allows no scaling: dct_scaling changes nothing.
  const FusedAndUnfused large = run(R"({"height": 300, "width": 300, "dct_scaling": true})", 5);
  ASSERT_TRUE(large.fused.ok()) << large.fused;
  EXPECT_TRUE(large.fused_out.tensors == large.unfused_out.tensors);
}

}  // namespace
}  // namespace granary::udf_test
