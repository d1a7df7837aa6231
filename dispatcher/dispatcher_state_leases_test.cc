// DispatcherState and consumer leases (one reader per consumer, DESIGN.md §6): claims, refusals,
// takeovers (generation bumps), releases, snapshots and elastic resume.
#include "dispatcher/dispatcher_state_test_fixture.h"
#include "dispatcher/request_limits.h"
#include "gmock/gmock.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

class DispatcherStateLeasesTest : public DispatcherStateTest {
 protected:
  absl::Status Claim(int32_t consumer, const std::string& reader, bool takeover = false) {
    Update u;
    ClaimConsumerUpdate& c = *u.mutable_claim_consumer();
    c.set_job_id(1);
    c.set_consumer(consumer);
    c.set_reader_id(reader);
    c.set_description(reader + "-host:1");
    c.set_takeover(takeover);
    return Apply(u);
  }

  absl::Status Release(int32_t consumer, const std::string& reader) {
    Update u;
    ReleaseConsumerUpdate& r = *u.mutable_release_consumer();
    r.set_job_id(1);
    r.set_consumer(consumer);
    r.set_reader_id(reader);
    return Apply(u);
  }

  const ConsumerLease& LeaseOf(int32_t consumer) {
    const ConsumerLease* lease = DispatcherState::FindLease(*state_.FindJob(1), consumer);
    EXPECT_NE(lease, nullptr) << "consumer " << consumer << " has no lease";
    static const ConsumerLease kNone;
    return lease == nullptr ? kNone : *lease;
  }
};

TEST_F(DispatcherStateLeasesTest, AFreeConsumerIsGrantedAtGenerationOne) {
  Register("w1");
  StartJob(2, 1, 4);
  ASSERT_TRUE(Claim(1, "a").ok());
  EXPECT_EQ(LeaseOf(1).reader_id(), "a");
  EXPECT_EQ(LeaseOf(1).description(), "a-host:1");
  EXPECT_EQ(LeaseOf(1).generation(), 1);
  EXPECT_EQ(DispatcherState::FindLease(*state_.FindJob(1), 0), nullptr);
}

TEST_F(DispatcherStateLeasesTest, TheHoldersReclaimChangesNothing) {
  Register("w1");
  StartJob(1, 1, 4);
  ASSERT_TRUE(Claim(0, "a").ok());
  EXPECT_EQ(Claim(0, "a").code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(LeaseOf(0).generation(), 1);
}

TEST_F(DispatcherStateLeasesTest, AnotherReadersClaimIsRefusedNamingTheHolder) {
  Register("w1");
  StartJob(1, 1, 4);
  ASSERT_TRUE(Claim(0, "a").ok());
  const absl::Status refused = Claim(0, "b");
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("held by reader a (a-host:1, generation 1)"));
  EXPECT_EQ(LeaseOf(0).reader_id(), "a");
}

TEST_F(DispatcherStateLeasesTest, ATakeoverBumpsTheGeneration) {
  Register("w1");
  StartJob(1, 1, 4);
  ASSERT_TRUE(Claim(0, "a").ok());
  ASSERT_TRUE(Claim(0, "b", /*takeover=*/true).ok());
  EXPECT_EQ(LeaseOf(0).reader_id(), "b");
  EXPECT_EQ(LeaseOf(0).generation(), 2);
  // The old holder can neither release nor reclaim without a takeover.
  EXPECT_EQ(Release(0, "a").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Claim(0, "a").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(LeaseOf(0).generation(), 2);
}

TEST_F(DispatcherStateLeasesTest, AReleasedConsumerIsFreeAndKeepsItsGeneration) {
  Register("w1");
  StartJob(1, 1, 4);
  ASSERT_TRUE(Claim(0, "a").ok());
  ASSERT_TRUE(Release(0, "a").ok());
  EXPECT_EQ(LeaseOf(0).reader_id(), "");
  EXPECT_EQ(LeaseOf(0).generation(), 1);
  ASSERT_TRUE(Claim(0, "b").ok());
  EXPECT_EQ(LeaseOf(0).generation(), 2);
}

TEST_F(DispatcherStateLeasesTest, BadClaimsAreRefusedNamingWhatIsWrong) {
  Register("w1");
  StartJob(2, 1, 4);
  const absl::Status out_of_range = Claim(2, "a");
  EXPECT_EQ(out_of_range.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out_of_range.message(), HasSubstr("has 2 consumers; no consumer 2"));
  const absl::Status no_reader = Claim(0, "");
  EXPECT_EQ(no_reader.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_reader.message(), HasSubstr("names no reader id"));
  const absl::Status too_long = Claim(0, std::string(kMaxNameBytes + 1, 'r'));
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_long.message(), HasSubstr("reader id has"));
  Update no_job;
  no_job.mutable_claim_consumer()->set_job_id(7);
  no_job.mutable_claim_consumer()->set_reader_id("a");
  EXPECT_EQ(Apply(no_job).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(state_.FindJob(1)->leases().empty());
}

TEST_F(DispatcherStateLeasesTest, LeasesSurviveASnapshot) {
  Register("w1");
  StartJob(2, 1, 4);
  ASSERT_TRUE(Claim(1, "a").ok());
  ASSERT_TRUE(Claim(0, "b").ok());
  ASSERT_TRUE(Claim(1, "c", /*takeover=*/true).ok());
  const absl::StatusOr<DispatcherState> loaded = DispatcherState::FromProto(state_.ToProto());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->ToProto().SerializeAsString(), state_.ToProto().SerializeAsString());
  const ConsumerLease* lease = DispatcherState::FindLease(*loaded->FindJob(1), 1);
  ASSERT_NE(lease, nullptr);
  EXPECT_EQ(lease->reader_id(), "c");
  EXPECT_EQ(lease->generation(), 2);
}

TEST_F(DispatcherStateLeasesTest, AnElasticResumeDropsTheLeasesOfConsumersThatAreGone) {
  Register("w1");
  StartJob(3, 1, 6);
  ASSERT_TRUE(Claim(0, "a").ok());
  ASSERT_TRUE(Claim(2, "c").ok());
  Update u;
  ResumeAtConsumersUpdate& r = *u.mutable_resume_at_consumers();
  r.set_job_id(1);
  r.set_epoch(0);
  r.set_from_consumers(3);
  r.set_num_consumers(2);
  ASSERT_TRUE(Apply(u).ok());
  EXPECT_EQ(LeaseOf(0).reader_id(), "a");
  EXPECT_EQ(DispatcherState::FindLease(*state_.FindJob(1), 2), nullptr);
  ASSERT_TRUE(Claim(1, "d").ok());
  EXPECT_EQ(LeaseOf(1).generation(), 1);
}

}  // namespace
}  // namespace granary
