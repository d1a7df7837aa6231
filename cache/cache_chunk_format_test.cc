// Tests of the cache chunk record encoding (cache_chunk_format.h).
#include "cache/cache_chunk_format.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/core/element.h"
#include "pipeline/core/tensor.h"
#include "proto/cache.pb.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

TEST(CacheChunkFormatTest, DecodeCachedElementRoundTrips) {
  Element element;
  element.tensors.push_back(Tensor::Scalar<int64_t>(42));
  element.tensors.push_back(Tensor::String("bytes"));
  element.split_id = 3;
  element.record = 9;
  const std::string record = EncodeCachedElement(17, element);
  int64_t index = 0;
  Element decoded;
  ASSERT_TRUE(DecodeCachedElement(record, &index, &decoded).ok());
  EXPECT_EQ(index, 17);
  EXPECT_EQ(EncodeCachedElement(index, decoded), record);
}

// A Get epoch passes cached elements through (issue 14): the decoded element's tensors are views
// into one aligned copy of the record's image, which Serialize then hands out as it is.
TEST(CacheChunkFormatTest, DecodedElementsPassThroughAsTheirImage) {
  Element element;
  element.tensors.push_back(Tensor::FromVector<float>({2, 2}, {1, 2, 3, 4}));
  element.tensors.push_back(Tensor::Strings({1}, {"label"}));
  element.split_id = 3;
  const std::string record = EncodeCachedElement(5, element);
  int64_t index = 0;
  Element decoded;
  ASSERT_TRUE(DecodeCachedElement(record, &index, &decoded).ok());
  EXPECT_EQ(index, 5);
  EXPECT_EQ(decoded, element);
  ASSERT_TRUE(decoded.IsImageCurrent());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(decoded.tensors[0].content().data()) % 64, 0u);
  auto image = decoded.Serialize();
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(image->get(), decoded.image.get()) << "no new image: the cached one passes through";
  // The record holds the element's image as it is.
  auto own = element.Serialize();
  ASSERT_TRUE(own.ok());
  EXPECT_NE(record.find(std::string((*own)->bytes())), std::string::npos);
}

// Records of the format before images (a protobuf-serialized element, contents wherever protobuf
// put them) still decode to the same element.
TEST(CacheChunkFormatTest, RecordsOfProtobufSerializedElementsDecode) {
  Element element;
  element.tensors.push_back(Tensor::FromVector<int32_t>({3}, {7, 8, 9}));
  element.record = 12;
  CachedElement cached;
  cached.set_index(2);
  element.ToProto(cached.mutable_element());
  int64_t index = 0;
  Element decoded;
  ASSERT_TRUE(DecodeCachedElement(cached.SerializeAsString(), &index, &decoded).ok());
  EXPECT_EQ(index, 2);
  EXPECT_EQ(decoded, element);
}

TEST(CacheChunkFormatTest, DecodeCachedElementRefusesGarbageAndInconsistentTensors) {
  int64_t index = 0;
  Element decoded;
  const absl::Status garbage = DecodeCachedElement("\xff\xff\xff", &index, &decoded);
  EXPECT_TRUE(absl::IsDataLoss(garbage)) << garbage;
  EXPECT_THAT(garbage.message(), HasSubstr("not a cached element"));

  // A shape of 10^12 elements with one byte of content: an error, not an allocation.
  CachedElement cached;
  TensorProto* tensor = cached.mutable_element()->add_tensors();
  tensor->set_dtype(DT_INT64);
  tensor->add_shape(1000000);
  tensor->add_shape(1000000);
  tensor->set_content("x");
  EXPECT_FALSE(DecodeCachedElement(cached.SerializeAsString(), &index, &decoded).ok());
}

}  // namespace
}  // namespace granary
