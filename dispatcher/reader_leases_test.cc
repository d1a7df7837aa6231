// One reader per consumer through DispatcherImpl (reader_leases.h), over a real journal:
// refused claims name the holder, takeovers and expiry bump the generation and fence the old
// reader's heartbeats, a lease survives a restart with its silence counted from recovery.
#include "common/status_macros.h"
#include "dispatcher/dispatcher_impl_test_fixture.h"
#include "gmock/gmock.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

class ReaderLeasesTest : public DispatcherImplTest {
 protected:
  void SetUp() override {
    Open();
    RegisterWorker("a");
    job_ = CreateJob(RegisterRangeDataset(10, 5), "j", 2, 1);
    ASSERT_TRUE(StartEpoch(job_, 0).ok());
  }

  absl::StatusOr<int64_t> Claim(const std::string& reader, bool takeover = false) {
    ClaimConsumerRequest request;
    request.set_job_id(job_);
    request.set_consumer(1);
    request.set_reader_id(reader);
    request.set_description(reader + "-host:7");
    request.set_takeover(takeover);
    ClaimConsumerResponse response;
    RETURN_IF_ERROR(impl_->ClaimConsumer(request, &response));
    return response.generation();
  }

  absl::Status Heartbeat(const std::string& reader) {
    ClientHeartbeatRequest request;
    request.set_job_id(job_);
    request.set_epoch(0);
    request.set_consumer(1);
    request.set_reader_id(reader);
    ClientHeartbeatResponse response;
    return impl_->ClientHeartbeat(request, &response);
  }

  int64_t job_ = 0;
};

TEST_F(ReaderLeasesTest, ASecondLiveReaderIsRefusedNamingTheHolder) {
  ASSERT_EQ(Claim("r1").value(), 1);
  // Not yet heard from since r2 asked: is it live? r2 is to ask again.
  const absl::StatusOr<int64_t> first = Claim("r2");
  EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(first.status().message(),
              HasSubstr("not heard from since reader r2 first asked 0 ms ago"));
  clock_.AdvanceMicros(100'000);
  ASSERT_TRUE(Heartbeat("r1").ok());
  const absl::StatusOr<int64_t> refused = Claim("r2");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("consumer 1 of job 1 is read by reader r1 (r1-host:7, generation 1)"));
  EXPECT_THAT(refused.status().message(), HasSubstr("its lease expires after 1000 ms"));
  EXPECT_THAT(refused.status().message(), HasSubstr("--takeover"));
  // The holder's retried claim is granted as it stands.
  EXPECT_EQ(Claim("r1").value(), 1);
  EXPECT_TRUE(Heartbeat("r1").ok());
}

TEST_F(ReaderLeasesTest, ATakeoverFencesTheOldReadersHeartbeats) {
  ASSERT_EQ(Claim("r1").value(), 1);
  ASSERT_TRUE(Heartbeat("r1").ok());
  ASSERT_EQ(Claim("r2", /*takeover=*/true).value(), 2);
  const absl::Status fenced = Heartbeat("r1");
  EXPECT_EQ(fenced.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(fenced.message(),
              HasSubstr("consumer 1 of job 1 was taken over by reader r2 (r2-host:7, "
                        "generation 2): reader r1 does not hold it"));
  EXPECT_EQ(Heartbeat("").code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(Heartbeat("r2").ok());
}

TEST_F(ReaderLeasesTest, AnExpiredLeaseIsClaimedWithoutTakeover) {
  ASSERT_EQ(Claim("r1").value(), 1);
  clock_.AdvanceMicros(kTimeoutMs * 1000 / 2);
  ASSERT_TRUE(Heartbeat("r1").ok());  // renews
  clock_.AdvanceMicros(kTimeoutMs * 1000 / 8);
  EXPECT_EQ(Claim("r2").status().code(), absl::StatusCode::kUnavailable);
  // Silent since r2 first asked: r2 asks again until the lease expires, which the answer names.
  clock_.AdvanceMicros(kTimeoutMs * 1000 / 2);
  const absl::StatusOr<int64_t> early = Claim("r2");
  EXPECT_EQ(early.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(early.status().message(),
              HasSubstr("first asked 500 ms ago (silent for 625 ms): if it is gone, its lease "
                        "expires in 375 ms"));
  clock_.AdvanceMicros(kTimeoutMs * 1000);
  EXPECT_EQ(Claim("r2").value(), 2);
  EXPECT_EQ(Heartbeat("r1").code(), absl::StatusCode::kAborted);
}

TEST_F(ReaderLeasesTest, ALeaseSurvivesARestartAndItsSilenceCountsFromRecovery) {
  ASSERT_EQ(Claim("r1").value(), 1);
  clock_.AdvanceMicros(kTimeoutMs * 1000 * 10);
  Open();
  // Counted from recovery: not expired, so r2 waits; r1's retried claim is granted.
  EXPECT_EQ(Claim("r2").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Claim("r1").value(), 1);
  clock_.AdvanceMicros(kTimeoutMs * 1000 + 1000);
  EXPECT_EQ(Claim("r2").value(), 2);
}

TEST_F(ReaderLeasesTest, AReleasedConsumerIsFreeAtOnce) {
  ASSERT_EQ(Claim("r1").value(), 1);
  ReleaseConsumerRequest release;
  release.set_job_id(job_);
  release.set_consumer(1);
  release.set_reader_id("r1");
  ASSERT_TRUE(impl_->ReleaseConsumer(release).ok());
  EXPECT_EQ(impl_->ReleaseConsumer(release).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Heartbeat("r1").code(), absl::StatusCode::kAborted);
  EXPECT_EQ(Claim("r2").value(), 2);
}

TEST_F(ReaderLeasesTest, AClaimOfAnUnknownJobOrConsumerIsRefused) {
  ClaimConsumerRequest request;
  request.set_job_id(99);
  request.set_reader_id("r1");
  ClaimConsumerResponse response;
  EXPECT_EQ(impl_->ClaimConsumer(request, &response).code(), absl::StatusCode::kNotFound);
  request.set_job_id(job_);
  request.set_consumer(2);
  const absl::Status out_of_range = impl_->ClaimConsumer(request, &response);
  EXPECT_EQ(out_of_range.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out_of_range.message(), HasSubstr("has 2 consumers; no consumer 2"));
}

}  // namespace
}  // namespace granary
