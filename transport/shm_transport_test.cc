#include "transport/shm_transport.h"

#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/element_transport_test_util.h"
#include "transport/shm_backing.h"
#include "transport/shm_protocol.h"
#include "transport/shm_test_util.h"
#include "transport/transport_registry.h"

namespace granary {
namespace {

using ::testing::HasSubstr;
using Outcome = ReceivedImage::Outcome;

constexpr size_t kSegmentMinBytes = 64 << 10;

class ShmTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!MemfdBacking::Available()) GTEST_SKIP() << "no memfd_create on this kernel";
    address_ = testing::UniqueWorkerAddress("shm-transport-test");
    auto server = TransportRegistry::BuiltIn().StartServer("shm", {address_, kSegmentMinBytes});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_NE(server_->pool(), nullptr);
    // One element below the segment size (by bytes), two in segments.
    for (size_t size : {size_t{1000}, size_t{1} << 20, size_t{3} << 20}) {
      images_.push_back(
          testing::FilledImage(size, static_cast<char>('k' + images_.size()), server_->pool()));
    }
    worker_ = std::make_unique<testing::InProcessWorker>(server_.get(), images_);
    RegisterWorkerRequest registration;
    server_->Advertise(&registration);
    nonce_ = registration.shm_nonce();
    ASSERT_FALSE(nonce_.empty());
  }

  // Fetches every element through `channel` and checks what arrives is what was sent.
  void ExpectRoundTrip(ElementChannel& channel, Compression compression, bool by_segment) {
    const ReceivedReply reply = testing::FetchAll(channel, compression);
    EXPECT_EQ(worker_->last_transport(), by_segment ? "shm" : "tcp");
    ASSERT_EQ(reply.elements.size(), images_.size());
    for (size_t i = 0; i < images_.size(); ++i) {
      const ReceivedPayload& payload = reply.elements[i];
      const bool in_segment = by_segment && images_[i]->size() >= kSegmentMinBytes;
      EXPECT_EQ(payload.shm_segment != 0, in_segment) << "element " << i;
      EXPECT_EQ(payload.compression, in_segment ? COMPRESSION_NONE : compression)
          << "element " << i;
      EXPECT_EQ(payload.element_size(),
                static_cast<int64_t>(in_segment ? images_[i]->size() : payload.payload.size()));
      const ReceivedImage image = channel.Receive(payload);
      ASSERT_EQ(image.outcome, Outcome::kOk) << image.error;
      EXPECT_EQ(image.mapped, in_segment) << "element " << i;
      EXPECT_EQ(image.bytes, images_[i]->bytes()) << "element " << i;
      if (in_segment) {
        EXPECT_NE(image.bytes.data(), images_[i]->data()) << "mapped anew, not the same memory";
      }
    }
  }

  std::string address_;
  std::string nonce_;
  std::unique_ptr<ElementServer> server_;
  std::vector<BufferRef> images_;
  std::unique_ptr<testing::InProcessWorker> worker_;
};

// A client of the worker's host gets large elements by segment and maps them, small ones by
// bytes, hashed (and compressed when asked) like over TCP.
TEST_F(ShmTransportTest, ElementsRoundTripBySegmentAndByBytes) {
  auto channel =
      TransportRegistry::BuiltIn().OpenChannel("shm", {address_, worker_->Channel(), nonce_});
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_STREQ((*channel)->name(), "shm");
  EXPECT_FALSE((*channel)->broken());
  ExpectRoundTrip(**channel, COMPRESSION_NONE, /*by_segment=*/true);
  ExpectRoundTrip(**channel, COMPRESSION_LZ4, /*by_segment=*/true);
  GetWorkerStatusResponse status;
  server_->AddStatus(&status);
  EXPECT_TRUE(status.shared_memory());
  EXPECT_EQ(status.shm_sessions(), 1);
}

// A request without a session (a client elsewhere, or one that chose TCP) gets every element by
// bytes from the same server.
TEST_F(ShmTransportTest, ATcpClientOfTheSameWorkerGetsBytes) {
  GrpcElementChannel channel(worker_->Channel());
  ExpectRoundTrip(channel, COMPRESSION_ZSTD, /*by_segment=*/false);
}

// When the worker is gone (its session closed), a segment cannot be mapped: retried, and the
// channel is broken, to be replaced.
TEST_F(ShmTransportTest, ASegmentOfAGoneWorkerIsRetried) {
  auto channel = ShmElementChannel::Open(address_, nonce_, worker_->Channel());
  ASSERT_TRUE(channel.ok()) << channel.status();
  GetElementsRequest request;
  request.set_from_index(1);
  request.set_max_bytes(1);
  grpc::ClientContext context;
  ReceivedReply reply;
  ASSERT_TRUE((*channel)->Fetch(&context, request, &reply).ok());
  ASSERT_EQ(reply.elements.size(), 1u);
  ASSERT_NE(reply.elements[0].shm_segment, 0u);
  worker_.reset();
  images_.clear();  // before the pool they are of
  server_.reset();
  for (int i = 0; i < 500 && !(*channel)->broken(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_TRUE((*channel)->broken());
  EXPECT_EQ((*channel)->Receive(reply.elements[0]).outcome, Outcome::kRetry);
}

// Opening checks who listens (ShmClient::Connect): nothing under the nonce is Unavailable, a
// listener whose hello names another process is PermissionDenied.
TEST_F(ShmTransportTest, OpeningChecksTheListener) {
  auto nobody = TransportRegistry::BuiltIn().OpenChannel(
      "shm", {address_, worker_->Channel(), "00000000deadbeef"});
  EXPECT_EQ(nobody.status().code(), absl::StatusCode::kUnavailable) << nobody.status();
  const std::string nonce = "000000005a5a5a5a";
  testing::ShmSquatter squatter(ShmSocketName(address_, nonce).substr(1),
                                testing::Hello(1, static_cast<uint64_t>(::getpid()) + 1));
  ASSERT_TRUE(squatter.bound());
  auto impostor =
      TransportRegistry::BuiltIn().OpenChannel("shm", {address_, worker_->Channel(), nonce});
  EXPECT_EQ(impostor.status().code(), absl::StatusCode::kPermissionDenied) << impostor.status();
  EXPECT_THAT(impostor.status().message(), HasSubstr("hello names process"));
}

}  // namespace
}  // namespace granary
