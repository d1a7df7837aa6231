#include "client/position.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

ClientPosition MakePosition() {
  ClientPosition position;
  position.set_job_id(3);
  position.set_epoch(2);
  position.set_consumer(1);
  (*position.mutable_next_index())[7] = 120;
  (*position.mutable_next_index())[8] = 0;
  (*position.mutable_next_index())[9] = 64;
  return position;
}

TEST(PositionTest, RoundTrip) {
  const ClientPosition position = MakePosition();
  const std::string blob = EncodePosition(position);
  auto decoded = DecodePosition(blob, 3, 2, 1);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->job_id(), 3);
  EXPECT_EQ(decoded->epoch(), 2);
  EXPECT_EQ(decoded->consumer(), 1);
  ASSERT_EQ(decoded->next_index_size(), 3);
  EXPECT_EQ(decoded->next_index().at(7), 120);
  EXPECT_EQ(decoded->next_index().at(8), 0);
  EXPECT_EQ(decoded->next_index().at(9), 64);
}

TEST(PositionTest, EncodingIsDeterministic) {
  ClientPosition reversed;
  reversed.set_job_id(3);
  reversed.set_epoch(2);
  reversed.set_consumer(1);
  (*reversed.mutable_next_index())[9] = 64;
  (*reversed.mutable_next_index())[8] = 0;
  (*reversed.mutable_next_index())[7] = 120;
  EXPECT_EQ(EncodePosition(reversed), EncodePosition(MakePosition()));
}

TEST(PositionTest, MalformedBlobIsInvalidArgument) {
  for (const std::string& blob :
       {std::string("not a position"), std::string("GPOS1\xff\xff"), std::string("GPO")}) {
    auto decoded = DecodePosition(blob, 3, 2, 1);
    ASSERT_FALSE(decoded.ok()) << blob;
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(decoded.status().message(), HasSubstr("malformed"));
  }
}

TEST(PositionTest, TruncatedBlobIsInvalidArgument) {
  const std::string blob = EncodePosition(MakePosition());
  auto decoded = DecodePosition(blob.substr(0, blob.size() - 1), 3, 2, 1);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PositionTest, OtherEpochIsNamed) {
  auto decoded = DecodePosition(EncodePosition(MakePosition()), 3, 5, 1);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded.status().message(), HasSubstr("its epoch is 2, not 5"));
  EXPECT_THAT(decoded.status().message(), ::testing::Not(HasSubstr("job")));
}

TEST(PositionTest, OtherJobAndConsumerAreNamed) {
  auto decoded = DecodePosition(EncodePosition(MakePosition()), 4, 2, 0);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded.status().message(), HasSubstr("its job is 3, not 4"));
  EXPECT_THAT(decoded.status().message(), HasSubstr("its consumer is 1, not 0"));
}

TEST(PositionTest, NegativeIndexIsInvalidArgument) {
  ClientPosition position = MakePosition();
  (*position.mutable_next_index())[8] = -1;
  auto decoded = DecodePosition(EncodePosition(position), 3, 2, 1);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded.status().message(), HasSubstr("task 8"));
}

}  // namespace
}  // namespace granary
