// Tests of the cache chunk record encoding (cache_chunk_format.h).
#include "pipeline/cache_chunk_format.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/element.h"
#include "pipeline/tensor.h"
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
