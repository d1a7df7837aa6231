#include "transport/elements_reply.h"

#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "gtest/gtest.h"
#include "proto/worker.pb.h"

namespace granary {
namespace {

BufferRef Image(size_t size, char fill) {
  auto buffer = BufferPool::Default()->Allocate(size);
  EXPECT_TRUE(buffer.ok());
  std::memset((*buffer)->data(), fill, size);
  return *buffer;
}

ElementsReply Reply() {
  ElementsReply reply;
  reply.elements.push_back({0, 0, true, Image(10, 'a')});  // index, checksum 0: fields omitted
  const BufferRef big = Image(3 << 20, 'b');
  reply.elements.push_back({7, Hash3_64(big->bytes()), true, big});
  reply.elements.push_back({8, 99, true, Image(0, 'c')});  // an empty payload
  reply.end_of_task = true;
  reply.num_elements = 9;
  reply.recomputed = 4;
  return reply;
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// What the worker sends is a GetElementsResponse to any protobuf parser, and the payloads are
// not copied into it: the byte buffer holds references to the images until it is gone.
TEST(ElementsReplyTest, SerializesAsAGetElementsResponseReferencingTheImages) {
  ElementsReply reply = Reply();
  const BufferRef big = reply.elements[1].image;
  grpc::ByteBuffer buffer;
  bool own = false;
  ASSERT_TRUE(grpc::SerializationTraits<ElementsReply>::Serialize(reply, &buffer, &own).ok());
  EXPECT_TRUE(own);
  reply = ElementsReply();
  EXPECT_GT(big.use_count(), 1) << "the byte buffer holds the image";
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer.Dump(&slices).ok());
  bool found = false;
  for (const grpc::Slice& s : slices) found |= s.begin() == reinterpret_cast<const uint8_t*>(big->data());
  EXPECT_TRUE(found) << "a slice points at the image itself";
  slices.clear();

  GetElementsResponse proto;
  ASSERT_TRUE(proto.ParseFromString(Flatten(buffer)));
  ASSERT_EQ(proto.elements_size(), 3);
  EXPECT_EQ(proto.elements(0).payload(), std::string(10, 'a'));
  EXPECT_EQ(proto.elements(1).index(), 7);
  EXPECT_EQ(proto.elements(1).checksum(), Hash3_64(big->bytes()));
  EXPECT_EQ(proto.elements(1).payload().size(), 3u << 20);
  EXPECT_TRUE(proto.elements(2).payload().empty());
  EXPECT_TRUE(proto.end_of_task());
  EXPECT_EQ(proto.num_elements(), 9);
  EXPECT_EQ(proto.recomputed(), 4);

  buffer.Clear();
  EXPECT_EQ(big.use_count(), 1) << "released once the byte buffer is gone";
}

// Whatever slices the answer arrives in, the client reads the same elements, hashes each
// payload over its pieces as if contiguous, and copies it out intact.
TEST(ElementsReplyTest, DeserializesFromAnySlicingWithoutFlattening) {
  ElementsReply reply = Reply();
  grpc::ByteBuffer sent;
  bool own;
  ASSERT_TRUE(grpc::SerializationTraits<ElementsReply>::Serialize(reply, &sent, &own).ok());
  const std::string wire = Flatten(sent);
  const uint32_t seed = std::random_device()();
  std::mt19937 random(seed);
  for (int trial = 0; trial < 20; ++trial) {
    // Cut the bytes into random slices, as TCP reads would.
    std::vector<grpc::Slice> slices;
    for (size_t at = 0; at < wire.size();) {
      const size_t n = std::min<size_t>(wire.size() - at, 1 + random() % (trial < 10 ? 7 : 900000));
      slices.emplace_back(wire.data() + at, n);
      at += n;
    }
    grpc::ByteBuffer received(slices.data(), slices.size());
    ReceivedReply got;
    ASSERT_TRUE(grpc::SerializationTraits<ReceivedReply>::Deserialize(&received, &got).ok());
    ASSERT_TRUE(got.malformed.ok()) << got.malformed << " seed " << seed;
    ASSERT_EQ(got.elements.size(), 3u) << "seed " << seed;
    EXPECT_TRUE(got.end_of_task);
    EXPECT_EQ(got.num_elements, 9);
    EXPECT_EQ(got.recomputed, 4);
    for (size_t i = 0; i < 3; ++i) {
      const ReceivedPayload& p = got.elements[i];
      EXPECT_EQ(p.index, reply.elements[i].index);
      EXPECT_EQ(p.checksum, reply.elements[i].checksum);
      ASSERT_EQ(p.payload.size(), reply.elements[i].image->size());
      EXPECT_EQ(p.payload.Hash(), Hash3_64(reply.elements[i].image->bytes())) << "seed " << seed;
      std::string copy(p.payload.size(), '\0');
      EXPECT_EQ(p.payload.CopyAndHash(copy.data()), Hash3_64(reply.elements[i].image->bytes()));
      EXPECT_EQ(copy, reply.elements[i].image->bytes()) << "seed " << seed << " element " << i;
    }
  }
}

// A compressed element travels as its compressed bytes, with its compression and image size.
TEST(ElementsReplyTest, ACompressedElementCarriesItsCompressionAndSize) {
  ElementsReply reply;
  ReplyElement e{3, 0, true, Image(5000, 'k')};
  e.compression = COMPRESSION_LZ4;
  e.compressed = Image(40, 'z');
  e.checksum = Hash3_64(e.compressed->bytes());
  reply.elements.push_back(e);
  grpc::ByteBuffer buffer;
  bool own;
  ASSERT_TRUE(grpc::SerializationTraits<ElementsReply>::Serialize(reply, &buffer, &own).ok());
  GetElementsResponse proto;
  ASSERT_TRUE(proto.ParseFromString(Flatten(buffer)));
  EXPECT_EQ(proto.elements(0).payload(), std::string(40, 'z'));
  EXPECT_EQ(proto.elements(0).compression(), COMPRESSION_LZ4);
  EXPECT_EQ(proto.elements(0).uncompressed_size(), 5000);
  ReceivedReply got;
  ASSERT_TRUE(grpc::SerializationTraits<ReceivedReply>::Deserialize(&buffer, &got).ok());
  ASSERT_EQ(got.elements.size(), 1u);
  EXPECT_EQ(got.elements[0].compression, COMPRESSION_LZ4);
  EXPECT_EQ(got.elements[0].uncompressed_size, 5000);
  EXPECT_EQ(got.elements[0].payload.size(), 40u);
  EXPECT_EQ(got.elements[0].checksum, e.checksum);
}

TEST(ElementsReplyTest, AMalformedResponseIsReportedNotThrown) {
  for (const std::string& bad : {std::string("\x0a\x10\x08", 3), std::string("\x0a\x03\x12\x09zz", 6),
                                 std::string("\x0b", 1)}) {
    grpc::Slice slice(bad.data(), bad.size());
    grpc::ByteBuffer buffer(&slice, 1);
    ReceivedReply got;
    ASSERT_TRUE(grpc::SerializationTraits<ReceivedReply>::Deserialize(&buffer, &got).ok());
    EXPECT_TRUE(absl::IsDataLoss(got.malformed)) << got.malformed;
    EXPECT_NE(got.malformed.message().find("GetElements response"), std::string::npos);
  }
}

}  // namespace
}  // namespace granary
