#include "common/grpc_status.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

TEST(GrpcStatusTest, CodesAndShortMessagesCrossUnchanged) {
  const absl::Status in = absl::NotFoundError("no dataset d0ce45");
  const grpc::Status wire = ToGrpcStatus(in);
  EXPECT_EQ(wire.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(FromGrpcStatus(wire), in);
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

// A message quoting a hostile 1 MiB id would not fit gRPC's metadata limit: it is cut, saying
// how much.
TEST(GrpcStatusTest, ALongMessageIsCutToTheWireLimit) {
  const std::string id(1 << 20, 'd');
  const grpc::Status wire = ToGrpcStatus(absl::NotFoundError("no dataset " + id));
  EXPECT_LE(wire.error_message().size(), kMaxWireStatusMessage);
  EXPECT_THAT(wire.error_message(), ::testing::StartsWith("no dataset ddd"));
  EXPECT_THAT(wire.error_message(), ::testing::EndsWith(" bytes cut)"));
}

}  // namespace
}  // namespace granary
