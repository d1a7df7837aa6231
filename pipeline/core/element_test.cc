// Element::Serialize writes the element wire image (transport/element_image.h), which every
// protobuf parser reads as the element's ElementProto, for every kind of tensor and provenance;
// Element::FromImage reads it back as views; an element built inside its image is serialized
// by handing the image out, until its tensors stop being the image's.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "pipeline/core/element.h"
#include "proto/pipeline.pb.h"

namespace granary {
namespace {

// Serializes `element`, checks that protobuf parses the image to the same element and that
// FromImage reads it back equal, as views into the image; returns the image.
BufferRef CheckRoundTrip(const Element& element, const std::string& context) {
  absl::StatusOr<BufferRef> image = element.Serialize();
  EXPECT_TRUE(image.ok()) << image.status() << " " << context;
  if (!image.ok()) return nullptr;
  ElementProto parsed;
  EXPECT_TRUE(parsed.ParseFromArray((*image)->data(), static_cast<int>((*image)->size())))
      << context;
  auto via_proto = Element::FromProto(parsed);
  EXPECT_TRUE(via_proto.ok()) << via_proto.status() << " " << context;
  if (via_proto.ok()) {
    EXPECT_EQ(*via_proto, element) << context;
  }
  auto back = Element::FromImage(*image);
  EXPECT_TRUE(back.ok()) << back.status() << " " << context;
  if (!back.ok()) return *image;
  EXPECT_EQ(*back, element) << context;
  EXPECT_TRUE(back->IsImageCurrent()) << context;
  for (const Tensor& t : back->tensors) {
    if (t.content().empty()) continue;
    EXPECT_GE(t.content().data(), (*image)->data()) << context;
    EXPECT_LE(t.content().data() + t.content().size(), (*image)->data() + (*image)->size())
        << context;
  }
  // Read back from its image, the element serializes to that very image.
  auto again = back->Serialize();
  EXPECT_TRUE(again.ok()) << context;
  if (again.ok()) {
    EXPECT_EQ(again->get(), image->get()) << context;
  }
  return *image;
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
  for (size_t i = 0; i < cases.size(); ++i) CheckRoundTrip(cases[i], absl::StrCat("case ", i));
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
    CheckRoundTrip(element, absl::StrCat("seed ", seed, " trial ", trial));
  }
}

TEST(ElementSerializeTest, AnImageStaysCurrentThroughInPlaceChangesAndNotThroughReplacements) {
  Element element;
  element.tensors.push_back(Tensor::FromVector<float>({2}, {1.5f, -2.0f}));
  element.tensors.push_back(Tensor::Scalar<int64_t>(9));
  element.split_id = 4;
  const BufferRef image = CheckRoundTrip(element, "base");
  ASSERT_NE(image, nullptr);
  auto read = Element::FromImage(image);
  ASSERT_TRUE(read.ok());

  // An op changing a value in place changes the image with it: still current, same image.
  read->tensors[0].data<float>()[1] = 3.0f;
  ASSERT_TRUE(read->IsImageCurrent());
  auto reparsed = Element::FromImage(*read->Serialize());
  ASSERT_TRUE(reparsed.ok());
  EXPECT_EQ(reparsed->tensors[0].data<float>()[1], 3.0f);

  // A copy owns copies of the values: serialized anew, equal.
  const Element copy = *read;
  EXPECT_FALSE(copy.IsImageCurrent());
  auto copy_image = copy.Serialize();
  ASSERT_TRUE(copy_image.ok());
  EXPECT_NE(copy_image->get(), image.get());
  EXPECT_EQ((*copy_image)->bytes(), image->bytes());

  // A replaced tensor or changed provenance: serialized anew, with the new values.
  Element replaced = *read;
  replaced.image = image;
  replaced.tensors[1] = Tensor::Scalar<int64_t>(10);
  EXPECT_FALSE(replaced.IsImageCurrent());
  auto replaced_back = Element::FromImage(*replaced.Serialize());
  ASSERT_TRUE(replaced_back.ok());
  EXPECT_EQ(replaced_back->tensors[1].data<int64_t>()[0], 10);
  read->record = 77;
  EXPECT_FALSE(read->IsImageCurrent());
}

// An image from another writer whose contents are not aligned for their dtype is read as
// copies (aligned), never as misaligned views.
TEST(ElementSerializeTest, AnUnalignedImageIsReadAsAlignedCopies) {
  ElementProto proto;
  TensorProto* t = proto.add_tensors();
  t->set_dtype(DT_FLOAT);
  t->add_shape(3);
  const float values[3] = {1, 2, 3};
  t->set_content(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  const std::string bytes = proto.SerializeAsString();
  auto image = BufferPool::Default()->Allocate(bytes.size());
  ASSERT_TRUE(image.ok());
  std::memcpy((*image)->data(), bytes.data(), bytes.size());
  // Protobuf put the content 9 bytes in: misaligned for float32 in an aligned buffer.
  auto raw = ParseImage((*image)->bytes());
  ASSERT_TRUE(raw.ok());
  ASSERT_FALSE(ContentsAligned(*raw));
  auto element = Element::FromImage(*image);
  ASSERT_TRUE(element.ok()) << element.status();
  EXPECT_EQ(element->image, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(element->tensors[0].content().data()) % 4, 0u);
  EXPECT_EQ(element->tensors[0].data<float>()[2], 3.0f);
}

}  // namespace
}  // namespace granary
