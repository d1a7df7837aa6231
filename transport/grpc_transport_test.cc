#include "transport/grpc_transport.h"

#include <string>
#include <vector>

#include "common/hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/element_transport_test_util.h"

namespace granary {
namespace {

using ::testing::HasSubstr;
using Outcome = ReceivedImage::Outcome;

// Elements of several sizes: small, and large enough for gRPC to receive in several slices.
std::vector<BufferRef> Images() {
  std::vector<BufferRef> images;
  for (size_t size : {size_t{0}, size_t{100}, size_t{3} << 20, size_t{70000}}) {
    images.push_back(
        testing::FilledImage(size, static_cast<char>('a' + images.size()), BufferPool::Default()));
  }
  return images;
}

// The elements of `images` fetched and received through `channel`, compressed as asked.
void ExpectRoundTrip(Compression compression) {
  const std::vector<BufferRef> images = Images();
  GrpcElementServer server;
  testing::InProcessWorker worker(&server, images);
  GrpcElementChannel channel(worker.Channel());
  const ReceivedReply reply = testing::FetchAll(channel, compression);
  EXPECT_EQ(worker.last_transport(), "tcp");
  EXPECT_TRUE(reply.end_of_task);
  ASSERT_EQ(reply.elements.size(), images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    const ReceivedPayload& payload = reply.elements[i];
    EXPECT_EQ(payload.index, static_cast<int64_t>(i));
    EXPECT_EQ(payload.compression, compression);
    const ReceivedImage image = channel.Receive(payload);
    ASSERT_EQ(image.outcome, Outcome::kOk) << image.error;
    EXPECT_FALSE(image.mapped);
    EXPECT_EQ(image.bytes, images[i]->bytes()) << "element " << i;
    EXPECT_TRUE(ParseImage(image.bytes).ok());
  }
}

TEST(GrpcTransportTest, ElementsRoundTripUncompressed) { ExpectRoundTrip(COMPRESSION_NONE); }
TEST(GrpcTransportTest, ElementsRoundTripWithLz4) { ExpectRoundTrip(COMPRESSION_LZ4); }
TEST(GrpcTransportTest, ElementsRoundTripWithZstd) { ExpectRoundTrip(COMPRESSION_ZSTD); }

// What the worker prepares: every element hashed over the bytes it sends.
TEST(GrpcTransportTest, PrepareHashesTheBytesSent) {
  GrpcElementServer server;
  ElementsReply reply;
  reply.elements.push_back({3, 0, false, testing::FilledImage(5000, 'z', BufferPool::Default())});
  GetElementsRequest request;
  EXPECT_STREQ(server.Prepare(request, &reply), "tcp");
  EXPECT_TRUE(reply.elements[0].hashed);
  EXPECT_EQ(reply.elements[0].checksum, Hash3_64(reply.elements[0].image->bytes()));
  request.set_compression(COMPRESSION_LZ4);
  reply.elements[0].hashed = false;
  server.Prepare(request, &reply);
  ASSERT_NE(reply.elements[0].compressed, nullptr);
  EXPECT_EQ(reply.elements[0].checksum, Hash3_64(reply.elements[0].compressed->bytes()));
}

TEST(GrpcTransportTest, AnUnknownCompressionIsRefused) {
  GetElementsRequest request;
  request.set_compression(static_cast<Compression>(99));
  const absl::Status status = CheckElementsRequest(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("99"));
}

// `elements` as the client receives them (serialized as the worker sends them).
ReceivedReply AsReceived(const ElementsReply& elements) {
  grpc::ByteBuffer buffer;
  bool own;
  EXPECT_TRUE(grpc::SerializationTraits<ElementsReply>::Serialize(elements, &buffer, &own).ok());
  ReceivedReply reply;
  EXPECT_TRUE(grpc::SerializationTraits<ReceivedReply>::Deserialize(&buffer, &reply).ok());
  EXPECT_TRUE(reply.malformed.ok()) << reply.malformed;
  return reply;
}

TEST(GrpcTransportTest, APayloadFailingItsChecksumIsAMismatch) {
  const BufferRef image = testing::FilledImage(1000, 'q', BufferPool::Default());
  ElementsReply sent;
  sent.elements.push_back({1, Hash3_64(image->bytes()) ^ 1, true, image});
  const ReceivedReply reply = AsReceived(sent);
  const ReceivedImage received = GrpcElementChannel(nullptr).Receive(reply.elements[0]);
  EXPECT_EQ(received.outcome, Outcome::kChecksumMismatch);
  EXPECT_THAT(received.error.message(), HasSubstr("checksum mismatch"));
}

TEST(GrpcTransportTest, AnIntactPayloadThatIsNoElementIsSaid) {
  auto garbage = BufferPool::Default()->Allocate(16);
  ASSERT_TRUE(garbage.ok());
  std::memset((*garbage)->data(), 0xff, 16);
  ElementsReply sent;
  sent.elements.push_back({1, Hash3_64((*garbage)->bytes()), true, *garbage});
  const ReceivedReply reply = AsReceived(sent);
  EXPECT_EQ(GrpcElementChannel(nullptr).Receive(reply.elements[0]).outcome, Outcome::kNotAnElement);
}

TEST(GrpcTransportTest, APayloadNamingASegmentIsRetried) {
  ReceivedPayload payload;
  payload.shm_segment = 4;
  payload.shm_size = 10;
  const ReceivedImage received = GrpcElementChannel(nullptr).Receive(payload);
  EXPECT_EQ(received.outcome, Outcome::kRetry);
  EXPECT_THAT(received.error.message(), HasSubstr("shared memory"));
}

}  // namespace
}  // namespace granary
