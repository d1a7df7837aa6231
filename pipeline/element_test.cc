// Element::SerializeAsProto writes exactly the bytes of ToProto + SerializeAsString (workers
// send, and clients and caches check, those bytes), for every kind of tensor and provenance.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pipeline/element.h"
#include "proto/pipeline.pb.h"

namespace granary {
namespace {

std::string ViaProto(const Element& element) {
  ElementProto proto;
  element.ToProto(&proto);
  return proto.SerializeAsString();
}

TEST(ElementSerializeTest, EdgeCasesMatchTheProtoSerialization) {
  std::vector<Element> cases(6);
  cases[1].tensors.push_back(Tensor::Scalar<int64_t>(-5));
  cases[2].tensors.push_back(Tensor(DT_FLOAT, {0, 3}));  // No values: no content field.
  cases[3].tensors.push_back(Tensor::Strings({2}, {"a", ""}));
  cases[3].tensors.push_back(Tensor(DT_UINT8, {300}));  // A two-byte length.
  cases[4].split_id = UINT64_MAX;
  cases[4].record = -1;  // A ten-byte varint.
  cases[5].tensors.push_back(Tensor(DT_FLOAT, {128, 196, 196, 3}));  // A batch: 59 MB.
  cases[5].tensors.push_back(Tensor(DT_INT64, {128}));
  cases[5].split_id = 7;
  cases[5].record = 1 << 20;
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(cases[i].SerializeAsProto(), ViaProto(cases[i])) << "case " << i;
  }
}

TEST(ElementSerializeTest, RandomElementsMatchAndRoundTrip) {
  const uint32_t seed = std::random_device()();
  std::mt19937 rng(seed);
  const std::vector<DataType> dtypes = {DT_UINT8, DT_INT32, DT_INT64, DT_FLOAT,
                                        DT_DOUBLE, DT_BOOL,  DT_STRING};
  for (int trial = 0; trial < 200; ++trial) {
    Element element;
    element.split_id = rng() % 3 == 0 ? 0 : rng();
    element.record = static_cast<int64_t>(rng()) - (1ll << 31);
    const int num_tensors = rng() % 4;
    for (int t = 0; t < num_tensors; ++t) {
      std::vector<int64_t> shape(rng() % 4);
      for (int64_t& d : shape) d = rng() % 7;
      const DataType dtype = dtypes[rng() % dtypes.size()];
      Tensor tensor(dtype, shape);
      if (dtype == DT_STRING) {
        for (std::string& s : tensor.mutable_strings()) s = std::string(rng() % 200, 'x');
      } else {
        for (size_t b = 0; b < tensor.content().size(); ++b) tensor.mutable_bytes()[b] = rng();
      }
      element.tensors.push_back(std::move(tensor));
    }
    const std::string bytes = element.SerializeAsProto();
    ASSERT_EQ(bytes, ViaProto(element)) << "seed " << seed << " trial " << trial;
    ElementProto parsed;
    ASSERT_TRUE(parsed.ParseFromString(bytes)) << "seed " << seed << " trial " << trial;
    auto back = Element::FromProto(parsed);
    ASSERT_TRUE(back.ok()) << back.status() << " seed " << seed << " trial " << trial;
    EXPECT_EQ(*back, element) << "seed " << seed << " trial " << trial;
  }
}

}  // namespace
}  // namespace granary
