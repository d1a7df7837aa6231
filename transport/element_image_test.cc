#include "transport/element_image.h"

#include <cstring>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/buffer_pool.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// Writes an image of `specs` with numeric contents filled by a byte pattern (content byte j of
// tensor i is i * 31 + j), into a pooled buffer.
BufferRef WriteImage(const std::vector<ImageTensorSpec>& specs, uint64_t split, int64_t record) {
  ImageLayout layout(specs, split, record);
  auto buffer = BufferPool::Default()->Allocate(layout.size());
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  layout.WriteFraming((*buffer)->data());
  for (size_t i = 0; i < specs.size(); ++i) {
    char* content = (*buffer)->data() + layout.content_offset(i);
    for (size_t j = 0; j < layout.content_size(i); ++j) content[j] = static_cast<char>(i * 31 + j);
  }
  return *buffer;
}

TEST(ElementImageTest, ImageIsAnElementProtoWithAlignedContentsAndParsesToViewsIntoIt) {
  const std::vector<std::string> words = {"granary", "", "exactly once"};
  const std::vector<ImageTensorSpec> specs = {
      {DT_FLOAT, {2, 3}}, {DT_INT64, {}}, {DT_STRING, {3}, &words}, {DT_UINT8, {0, 4}},
      {DT_DOUBLE, {5}}};
  ImageLayout layout(specs, 77, -3);
  const BufferRef image = WriteImage(specs, 77, -3);
  ASSERT_EQ(image->size(), layout.size());
  for (size_t i : {0, 1, 4}) EXPECT_EQ(layout.content_offset(i) % kImageAlignment, 0u) << i;

  // Any protobuf parser reads it.
  ElementProto proto;
  ASSERT_TRUE(proto.ParseFromArray(image->data(), static_cast<int>(image->size())));
  ASSERT_EQ(proto.tensors_size(), 5);
  EXPECT_EQ(proto.split_id(), 77u);
  EXPECT_EQ(proto.record(), -3);
  EXPECT_EQ(proto.tensors(0).dtype(), DT_FLOAT);
  EXPECT_THAT(proto.tensors(0).shape(), ::testing::ElementsAre(2, 3));
  EXPECT_EQ(proto.tensors(0).content().size(), 24u);
  EXPECT_THAT(proto.tensors(2).string_values(), ::testing::ElementsAre("granary", "", "exactly once"));
  EXPECT_TRUE(proto.tensors(3).content().empty());

  auto view = ParseImage(image->bytes());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->split_id, 77u);
  EXPECT_EQ(view->record, -3);
  ASSERT_EQ(view->tensors.size(), 5u);
  EXPECT_TRUE(ContentsAligned(*view));
  for (size_t i : {0, 1, 4}) {
    EXPECT_EQ(view->tensors[i].data, image->data() + layout.content_offset(i)) << i;
    EXPECT_EQ(view->tensors[i].size, layout.content_size(i)) << i;
    EXPECT_EQ(view->tensors[i].content(), proto.tensors(i).content()) << i;
  }
  EXPECT_EQ(view->tensors[1].shape, std::vector<int64_t>{});
  EXPECT_EQ(view->tensors[3].shape, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(view->tensors[3].size, 0u);
  ASSERT_EQ(view->tensors[2].strings.size(), 3u);
  EXPECT_EQ(view->tensors[2].strings[2], "exactly once");
  // String views point into the image too.
  EXPECT_GE(view->tensors[2].strings[0].data(), image->data());
  EXPECT_LT(view->tensors[2].strings[0].data(), image->data() + image->size());
}

// The padding search holds across the sizes where the tensor's length prefix gains a byte
// (2^7, 2^14, 2^21) and for every header length before the content.
TEST(ElementImageTest, ContentsAlignedAcrossLengthPrefixBoundariesAndHeaderSizes) {
  std::mt19937_64 random(20261125);
  for (int64_t base : {1, 100, 128, 16000, 16384, 2097000, 2097152}) {
    for (int64_t delta = -70; delta <= 70; delta += 7) {
      const int64_t n = std::max<int64_t>(1, base + delta);
      const int rank_extra = static_cast<int>(random() % 4);
      std::vector<int64_t> shape = {n};
      for (int r = 0; r < rank_extra; ++r) shape.push_back(1);
      const std::vector<ImageTensorSpec> specs = {{DT_UINT8, {static_cast<int64_t>(random() % 300)}},
                                                  {DT_UINT8, shape}};
      ImageLayout layout(specs, random(), static_cast<int64_t>(random() % 1000));
      for (size_t i = 0; i < specs.size(); ++i) {
        if (layout.content_size(i) == 0) continue;
        ASSERT_EQ(layout.content_offset(i) % kImageAlignment, 0u)
            << "tensor " << i << " of " << n << " bytes (seed 20261125)";
      }
      const BufferRef image = WriteImage(specs, 5, 6);
      ElementProto proto;
      ASSERT_TRUE(proto.ParseFromArray(image->data(), static_cast<int>(image->size())))
          << n << " bytes";
      EXPECT_EQ(static_cast<int64_t>(proto.tensors(1).content().size()), n);
    }
  }
}

// Images written by protobuf itself (no padding, other field orders) parse the same way; so do
// unpacked shapes and fields of later versions.
TEST(ElementImageTest, ParsesWhatProtobufWritesAndSkipsUnknownFields) {
  ElementProto proto;
  TensorProto* t = proto.add_tensors();
  t->set_dtype(DT_INT32);
  t->add_shape(2);
  const int32_t values[2] = {7, -9};
  t->set_content(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  proto.set_split_id(3);
  proto.set_record(42);
  std::string bytes = proto.SerializeAsString();
  // Unknown field 15 (varint 1) inside the tensor is not an error: append a tensor with it and
  // an unpacked shape (field 2 as a varint).
  std::string extra;
  extra += '\x08';  // dtype
  extra += static_cast<char>(DT_UINT8);
  extra += '\x10';  // shape, unpacked
  extra += '\x01';
  extra += '\x1a';  // content: one byte
  extra += '\x01';
  extra += 'z';
  extra += '\x78';  // field 15, varint
  extra += '\x01';
  bytes += '\x0a';
  bytes += static_cast<char>(extra.size());
  bytes += extra;
  auto view = ParseImage(bytes);
  ASSERT_TRUE(view.ok()) << view.status();
  ASSERT_EQ(view->tensors.size(), 2u);
  EXPECT_EQ(view->tensors[0].dtype, DT_INT32);
  EXPECT_EQ(view->tensors[0].size, 8u);
  EXPECT_EQ(std::memcmp(view->tensors[0].data, values, 8), 0);
  EXPECT_EQ(view->split_id, 3u);
  EXPECT_EQ(view->record, 42);
  EXPECT_EQ(view->tensors[1].shape, std::vector<int64_t>{1});
  EXPECT_EQ(view->tensors[1].content(), "z");
}

// Fields a tensor's dtype does not use carry nothing (fuzz/corpus/element_image_fuzzer/
// finding-unused_fields): a numeric tensor's string values and a string tensor's content are
// dropped, so the view (and an aligned rewrite of it) is the element protobuf would read.
TEST(ElementImageTest, FieldsTheDtypeDoesNotUseAreDropped) {
  ElementProto proto;
  TensorProto* numeric = proto.add_tensors();
  numeric->set_dtype(DT_UINT8);
  numeric->add_shape(2);
  numeric->set_content("ab");
  numeric->add_string_values("stray");
  TensorProto* strings = proto.add_tensors();
  strings->set_dtype(DT_STRING);
  strings->add_shape(1);
  strings->add_string_values("x");
  strings->set_content("stray content");
  const std::string bytes = proto.SerializeAsString();  // The views point into it.
  auto view = ParseImage(bytes);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(view->tensors[0].strings.empty());
  EXPECT_EQ(view->tensors[0].content(), "ab");
  EXPECT_EQ(view->tensors[1].size, 0u);
  ASSERT_EQ(view->tensors[1].strings.size(), 1u);
  auto aligned = WriteAlignedImage(*view, BufferPool::Default());
  ASSERT_TRUE(aligned.ok());
  auto again = ParseImage((*aligned)->bytes());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->tensors[0].content(), "ab");
  EXPECT_EQ(again->tensors[1].strings, view->tensors[1].strings);
}

TEST(ElementImageTest, EveryTruncationIsAnErrorNamingAByteOffsetOrTheTensor) {
  const std::vector<std::string> words = {"a", "bc"};
  const std::vector<ImageTensorSpec> specs = {{DT_FLOAT, {4}}, {DT_STRING, {2}, &words}};
  const BufferRef image = WriteImage(specs, 1, 2);
  int failures = 0;
  for (size_t cut = 0; cut < image->size(); ++cut) {
    auto view = ParseImage(image->bytes().substr(0, cut));
    if (view.ok()) continue;  // A cut between whole fields can still be a consistent element.
    ++failures;
    EXPECT_THAT(view.status().message(), HasSubstr("element image:")) << cut;
  }
  EXPECT_GT(failures, static_cast<int>(image->size()) / 2);
}

TEST(ElementImageTest, InconsistentTensorsAreInvalidArgumentNamingTheTensor) {
  const auto parse = [](const TensorProto& t) {
    ElementProto proto;
    proto.add_tensors()->set_dtype(DT_UINT8);  // tensor 0: a consistent scalar... with content
    proto.mutable_tensors(0)->set_content("x");
    *proto.add_tensors() = t;
    return ParseImage(proto.SerializeAsString()).status();
  };
  TensorProto wrong_size;
  wrong_size.set_dtype(DT_FLOAT);
  wrong_size.add_shape(3);
  wrong_size.set_content("12345678");
  EXPECT_TRUE(absl::IsInvalidArgument(parse(wrong_size)));
  EXPECT_THAT(parse(wrong_size).message(), HasSubstr("tensor 1 (DT_FLOAT[3]): 8 content bytes"));

  TensorProto negative;
  negative.set_dtype(DT_UINT8);
  negative.add_shape(-2);
  EXPECT_THAT(parse(negative).message(), HasSubstr("negative dimension -2"));

  TensorProto no_dtype;
  no_dtype.add_shape(1);
  EXPECT_THAT(parse(no_dtype).message(), HasSubstr("tensor 1 has invalid dtype 0"));

  TensorProto strings;
  strings.set_dtype(DT_STRING);
  strings.add_shape(2);
  strings.add_string_values("only one");
  EXPECT_THAT(parse(strings).message(), HasSubstr("1 string values"));

  TensorProto huge;
  huge.set_dtype(DT_UINT8);
  for (int i = 0; i < 4; ++i) huge.add_shape(int64_t{1} << 40);
  EXPECT_THAT(parse(huge).message(), HasSubstr("more elements than any buffer holds"));
}

TEST(ElementImageTest, MalformedWireBytesAreDataLoss) {
  // A length running past the end, an over-long varint, a group wire type.
  for (const std::string& bytes :
       {std::string("\x0a\x05\x08\x01", 4), std::string("\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12),
        std::string("\x0b", 1)}) {
    const absl::Status status = ParseImage(bytes).status();
    EXPECT_TRUE(absl::IsDataLoss(status)) << status;
    EXPECT_THAT(status.message(), HasSubstr("at byte")) << status;
  }
}

}  // namespace
}  // namespace granary
