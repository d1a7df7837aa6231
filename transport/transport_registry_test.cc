#include "transport/transport_registry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/grpc_transport.h"

namespace granary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(TransportRegistryTest, BuiltInHoldsTcpAndSharedMemory) {
  EXPECT_THAT(TransportRegistry::BuiltIn().names(), ElementsAre("shm", "tcp"));
  auto server = TransportRegistry::BuiltIn().StartServer("tcp", {});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_STREQ((*server)->name(), "tcp");
  auto channel = TransportRegistry::BuiltIn().OpenChannel("tcp", {"127.0.0.1:1", nullptr, ""});
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_STREQ((*channel)->name(), "tcp");
}

// An unknown transport is refused by either end, naming it and the transports there are.
TEST(TransportRegistryTest, AnUnknownTransportIsRefusedByName) {
  const TransportRegistry& registry = TransportRegistry::BuiltIn();
  auto server = registry.StartServer("pigeon", {});
  EXPECT_EQ(server.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(server.status().message(), HasSubstr("'pigeon'"));
  EXPECT_THAT(server.status().message(), HasSubstr("known: shm, tcp"));
  auto channel = registry.OpenChannel("pigeon", {});
  EXPECT_EQ(channel.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(channel.status().message(), HasSubstr("'pigeon'"));
}

// A transport is added under a name of its own, and its factories get the options.
TEST(TransportRegistryTest, ARegisteredTransportIsStartedAndOpenedByItsName) {
  TransportRegistry registry;
  std::string started_for, opened_to;
  ASSERT_TRUE(registry
                  .Register(
                      "custom",
                      [&](const ElementServerOptions& options)
                          -> absl::StatusOr<std::unique_ptr<ElementServer>> {
                        started_for = options.worker_address;
                        return std::make_unique<GrpcElementServer>();
                      },
                      [&](const ElementChannelOptions& options)
                          -> absl::StatusOr<std::shared_ptr<ElementChannel>> {
                        opened_to = options.worker_address + "/" + options.advertised;
                        return absl::UnavailableError("not here");
                      })
                  .ok());
  EXPECT_THAT(registry.names(), ElementsAre("custom"));
  EXPECT_TRUE(registry.StartServer("custom", {"w:1", 0}).ok());
  EXPECT_EQ(started_for, "w:1");
  EXPECT_EQ(registry.OpenChannel("custom", {"w:2", nullptr, "n"}).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(opened_to, "w:2/n");
  EXPECT_EQ(registry.StartServer("tcp", {}).status().code(), absl::StatusCode::kNotFound)
      << "a registry holds only what was registered with it";
}

TEST(TransportRegistryTest, ANameIsRegisteredOnce) {
  TransportRegistry registry;
  const auto server =
      [](const ElementServerOptions&) -> absl::StatusOr<std::unique_ptr<ElementServer>> {
    return nullptr;
  };
  const auto channel =
      [](const ElementChannelOptions&) -> absl::StatusOr<std::shared_ptr<ElementChannel>> {
    return nullptr;
  };
  ASSERT_TRUE(registry.Register("x", server, channel).ok());
  const absl::Status again = registry.Register("x", server, channel);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr("'x'"));
}

}  // namespace
}  // namespace granary
