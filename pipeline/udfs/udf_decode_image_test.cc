// Tests of the decode_jpeg and decode_image UDFs (udf_decode_image.cc), and of the ResNet-style
// chain parse_example -> decode_jpeg -> random_crop -> random_flip -> normalize.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/image/image_codec.h"
#include "pipeline/udfs/udf_test_util.h"

namespace granary::udf_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Udf> Decoder(const std::string& name, const std::string& params = "{}") {
  absl::StatusOr<std::unique_ptr<Udf>> udf =
      MakeUdf({RegisterDecodeImageUdfs, name.c_str()}, params);
  EXPECT_TRUE(udf.ok()) << udf.status();
  return udf.ok() ? *std::move(udf) : nullptr;
}

TEST(DecodeImageUdfTest, DecodeJpegDecodesImagenet) {
  std::unique_ptr<Udf> udf = Decoder("decode_jpeg");
  ASSERT_NE(udf, nullptr);
  Element element = MakeElement({Tensor::String(ImagenetJpeg())});
  ASSERT_TRUE(udf->Map(element, UdfCall{}).ok());
  ASSERT_EQ(element.tensors.size(), 1u);
  EXPECT_EQ(element.tensors[0].DebugString(), "uint8[480,640,3]");
}

TEST(DecodeImageUdfTest, DecodeJpegHonorsChannels) {
  std::unique_ptr<Udf> udf = Decoder("decode_jpeg", R"({"channels": 1})");
  ASSERT_NE(udf, nullptr);
  Element element = MakeElement({Tensor::String(ImagenetJpeg())});
  ASSERT_TRUE(udf->Map(element, UdfCall{}).ok());
  EXPECT_EQ(element.tensors[0].DebugString(), "uint8[480,640,1]");
}

TEST(DecodeImageUdfTest, DecodesTheTensorAtIndexAndKeepsTheOthers) {
  std::unique_ptr<Udf> udf = Decoder("decode_image", R"({"index": 1})");
  ASSERT_NE(udf, nullptr);
  Element element = MakeElement({Tensor::Scalar<int64_t>(7), Tensor::String(ImagenetJpeg())});
  ASSERT_TRUE(udf->Map(element, UdfCall{}).ok());
  EXPECT_EQ(element.tensors[0].data<int64_t>()[0], 7);
  EXPECT_EQ(element.tensors[1].DebugString(), "uint8[480,640,3]");
}

TEST(DecodeImageUdfTest, DecodeImageDecodesCifarPngs) {
  std::unique_ptr<Udf> udf = Decoder("decode_image");
  ASSERT_NE(udf, nullptr);
  const std::vector<std::string> records = ReadTestRecords("cifar10_png.tfrecord");
  ASSERT_EQ(records.size(), 4u);
  for (const std::string& record : records) {
    Element element = MakeElement({Tensor::String(BytesFeature(record, "image/encoded"))});
    absl::Status status = udf->Map(element, UdfCall{});
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(element.tensors[0].DebugString(), "uint8[32,32,3]");
  }
}

TEST(DecodeImageUdfTest, DecodeJpegRejectsCifarPngClearly) {
  std::unique_ptr<Udf> udf = Decoder("decode_jpeg");
  ASSERT_NE(udf, nullptr);
  const std::vector<std::string> records = ReadTestRecords("cifar10_png.tfrecord");
  ASSERT_FALSE(records.empty());
  Element element = MakeElement({Tensor::String(BytesFeature(records[0], "image/encoded"))});
  absl::Status status = udf->Map(element, UdfCall{});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("decode_jpeg: the input is a PNG (first bytes 89 50 4E 47), not a JPEG; "
                        "use decode_image to decode PNG and JPEG"));
}

TEST(DecodeImageUdfTest, DecodeImageMatchesTutorialShapes) {
  // parse_example then decode_image with channels 0 (as encoded): the decoded shape is the
  // recorded [height, width, depth].
  absl::StatusOr<std::unique_ptr<Udf>> parse =
      MakeUdf({RegisterParseExampleUdf, "parse_example"},
              R"({"keys": ["image_raw", "height", "width", "depth"],
                  "dtypes": ["bytes", "int64", "int64", "int64"]})");
  ASSERT_TRUE(parse.ok()) << parse.status();
  std::unique_ptr<Udf> decode = Decoder("decode_image", R"({"channels": 0})");
  ASSERT_NE(decode, nullptr);
  const std::vector<std::string> records = ReadTestRecords("tutorial_images.tfrecord");
  ASSERT_EQ(records.size(), 2u);
  for (const std::string& record : records) {
    Element element = MakeElement({Tensor::String(record)});
    ASSERT_TRUE((*parse)->Map(element, UdfCall{}).ok());
    ASSERT_TRUE(decode->Map(element, UdfCall{}).ok());
    const Tensor& image = element.tensors[0];
    EXPECT_THAT(image.shape(), ElementsAre(element.tensors[1].data<int64_t>()[0],
                                           element.tensors[2].data<int64_t>()[0],
                                           element.tensors[3].data<int64_t>()[0]));
  }
}

TEST(DecodeImageUdfTest, DecodeImageRejectsGif) {
  std::unique_ptr<Udf> udf = Decoder("decode_image");
  ASSERT_NE(udf, nullptr);
  Element element = MakeElement({Tensor::String(GifBytes())});
  absl::Status status = udf->Map(element, UdfCall{});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("decode_image: unsupported image format (first bytes 47 49 46 38): only "
                        "JPEG and PNG are supported"));
}

TEST(DecodeImageUdfTest, DecodeJpegRejectsGif) {
  std::unique_ptr<Udf> udf = Decoder("decode_jpeg");
  ASSERT_NE(udf, nullptr);
  Element element = MakeElement({Tensor::String(GifBytes())});
  EXPECT_THAT(udf->Map(element, UdfCall{}).message(),
              HasSubstr("decode_jpeg: not a JPEG (first bytes 47 49 46 38)"));
}

TEST(DecodeImageUdfTest, CorruptJpegNamesTheUdfAndLibjpeg) {
  std::unique_ptr<Udf> udf = Decoder("decode_jpeg");
  ASSERT_NE(udf, nullptr);
  Element element = MakeElement({Tensor::String(ImagenetJpeg().substr(0, 20))});
  absl::Status status = udf->Map(element, UdfCall{});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("decode_jpeg: invalid JPEG (20 bytes): "));
}

TEST(DecodeImageUdfTest, IndexOutOfRangeIsAnError) {
  std::unique_ptr<Udf> udf = Decoder("decode_jpeg", R"({"index": 1})");
  ASSERT_NE(udf, nullptr);
  Element element = MakeElement({Tensor::String(ImagenetJpeg())});
  absl::Status status = udf->Map(element, UdfCall{});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("decode_jpeg: "));
  EXPECT_THAT(status.message(), HasSubstr("index 1 is out of range"));
  EXPECT_THAT(status.message(), HasSubstr("1 tensors"));
}

TEST(DecodeImageUdfTest, NonStringInputIsAnError) {
  std::unique_ptr<Udf> udf = Decoder("decode_image");
  ASSERT_NE(udf, nullptr);
  Element element = MakeElement({Tensor::Scalar<int64_t>(3)});
  absl::Status status = udf->Map(element, UdfCall{});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("decode_image: tensor 0 is int64[], need string"));
}

TEST(DecodeImageUdfTest, NonScalarInputIsAnError) {
  std::unique_ptr<Udf> udf = Decoder("decode_jpeg");
  ASSERT_NE(udf, nullptr);
  Element element = MakeElement({Tensor::Strings({2}, {"a", "b"})});
  EXPECT_THAT(udf->Map(element, UdfCall{}).message(),
              HasSubstr("decode_jpeg: tensor 0 is string[2], need string[] (one encoded image)"));
}

TEST(DecodeImageUdfTest, FactoryRejectsBadChannels) {
  absl::StatusOr<std::unique_ptr<Udf>> udf =
      MakeUdf({RegisterDecodeImageUdfs, "decode_image"}, R"({"channels": 4})");
  EXPECT_EQ(udf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(udf.status().message(),
              HasSubstr("param 'channels' must be 0 (as encoded), 1 or 3, got 4"));
}

TEST(DecodeImageUdfTest, FactoryRejectsNegativeIndex) {
  absl::StatusOr<std::unique_ptr<Udf>> udf =
      MakeUdf({RegisterDecodeImageUdfs, "decode_jpeg"}, R"({"index": -1})");
  EXPECT_THAT(udf.status().message(), HasSubstr("param 'index' must be >= 0, got -1"));
}

// The benchmark's chain on the ImageNet record, as parallel_map would run it: each UDF with its
// own key. Recomputing the element gives identical bytes.
Element RunResnetChain(const std::string& record, uint64_t key) {
  struct Step {
    RegisteredUdf udf;
    const char* params;
  };
  const Step steps[] = {
      {{RegisterParseExampleUdf, "parse_example"},
       R"({"keys": ["image/encoded", "image/class/label"], "dtypes": ["bytes", "int64"]})"},
      {{RegisterDecodeImageUdfs, "decode_jpeg"}, "{}"},
      {{RegisterRandomCropUdf, "random_crop"}, R"({"height": 224, "width": 224})"},
      {{RegisterRandomFlipUdf, "random_flip"}, "{}"},
      {{RegisterNormalizeUdf, "normalize"},
       R"({"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]})"},
  };
  Element element = MakeElement({Tensor::String(record)});
  uint64_t op = 0;
  for (const Step& step : steps) {
    element = ApplyUdf(step.udf, step.params, std::move(element), key * 1000 + op++);
  }
  return element;
}

TEST(DecodeImageUdfTest, ResnetChainIsDeterministicPerKey) {
  const std::vector<std::string> records =
      ReadTestRecords("imagenet_inception_train-00000-of-00001.tfrecord");
  ASSERT_EQ(records.size(), 1u);
  const Element a = RunResnetChain(records[0], 1);
  const Element b = RunResnetChain(records[0], 1);
  const Element c = RunResnetChain(records[0], 2);
  ASSERT_EQ(a.tensors.size(), 2u);
  EXPECT_EQ(a.tensors[0].DebugString(), "float32[224,224,3]");
  EXPECT_EQ(a.tensors[1].data<int64_t>()[0], 0);
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a == c);
}

}  // namespace
}  // namespace granary::udf_test
