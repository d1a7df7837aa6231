#include "client/precache.h"

#include <deque>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// An epoch of `n` elements.
class CountingReader : public EpochReader {
 public:
  explicit CountingReader(int64_t n) : left_(n) {}
  absl::Status Next(ReceivedElement* element, bool* end) override {
    *end = left_ == 0;
    if (left_ > 0) --left_;
    return absl::OkStatus();
  }
  std::string SavePosition() const override { return ""; }
  EpochStats stats() const override { return {}; }
  void SetDropObserver(std::function<void(const ReceivedElement&)>) override {}

 private:
  int64_t left_;
};

// The dispatcher's answers, one per look (the last repeats), and the epochs read.
struct FakeDispatcher {
  std::deque<GetOrCreateJobResponse> answers;
  std::vector<int64_t> epochs_read;

  PrecacheCalls Calls() {
    PrecacheCalls calls;
    calls.look = [this]() -> absl::StatusOr<GetOrCreateJobResponse> {
      GetOrCreateJobResponse answer = answers.front();
      if (answers.size() > 1) answers.pop_front();
      return answer;
    };
    calls.read_epoch = [this](int64_t job_id,
                              int64_t epoch) -> absl::StatusOr<std::unique_ptr<EpochReader>> {
      EXPECT_EQ(job_id, 7) << "the job look answered";
      epochs_read.push_back(epoch);
      return std::unique_ptr<EpochReader>(new CountingReader(10));
    };
    return calls;
  }
};

GetOrCreateJobResponse Answer(int64_t epochs_started) {
  GetOrCreateJobResponse r;
  r.set_job_id(7);
  r.set_epochs_started(epochs_started);
  r.set_cache_key("k");
  return r;
}

GetOrCreateJobResponse Writing(int64_t put_job, int64_t put_epoch) {
  GetOrCreateJobResponse r = Answer(put_epoch + 1);
  r.mutable_cache()->set_put_job_id(put_job);
  r.mutable_cache()->set_put_epoch(put_epoch);
  return r;
}

GetOrCreateJobResponse Complete(int64_t elements) {
  GetOrCreateJobResponse r = Answer(1);
  r.mutable_cache()->set_complete(true);
  r.mutable_cache()->set_num_elements(elements);
  return r;
}

TEST(PrecacheTest, ACompleteCacheReturnsAtOnceReadingNothing) {
  FakeDispatcher d;
  d.answers = {Complete(5)};
  absl::StatusOr<PrecacheResult> r = RunPrecache(d.Calls(), absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->already_complete);
  EXPECT_EQ(r->num_elements, 5);
  EXPECT_TRUE(d.epochs_read.empty());
}

TEST(PrecacheTest, AnUnknownCacheIsPutByTheJobsNextEpochThenAwaited) {
  FakeDispatcher d;
  // Unknown; after the read, still being written (the last TaskFinished on its way); complete.
  d.answers = {Answer(2), Writing(7, 2), Complete(10)};
  absl::StatusOr<PrecacheResult> r =
      RunPrecache(d.Calls(), absl::Seconds(10), absl::Milliseconds(1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->already_complete);
  EXPECT_EQ(r->elements_read, 10);
  EXPECT_THAT(d.epochs_read, ElementsAre(2));
}

TEST(PrecacheTest, AnInterruptedPutOfThisJobIsReadAgainToItsEnd) {
  FakeDispatcher d;
  d.answers = {Writing(7, 0), Writing(7, 0), Complete(10)};
  absl::StatusOr<PrecacheResult> r =
      RunPrecache(d.Calls(), absl::Seconds(10), absl::Milliseconds(1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(d.epochs_read, ElementsAre(0)) << "read once, then awaited";
}

TEST(PrecacheTest, ItsOwnPutThatStaysIncompleteIsReadAgain) {
  // A task moved to a new generation after the reader had its last element runs again only for
  // a reader: after reread_after without completion, the epoch is read again.
  FakeDispatcher d;
  d.answers = {Writing(7, 0), Writing(7, 0), Writing(7, 0), Writing(7, 0), Complete(10)};
  absl::StatusOr<PrecacheResult> r =
      RunPrecache(d.Calls(), absl::Seconds(10), absl::Milliseconds(5), absl::Milliseconds(1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(d.epochs_read.size(), 2u);
  EXPECT_EQ(r->elements_read, 10 * static_cast<int64_t>(d.epochs_read.size()));
}

TEST(PrecacheTest, AnotherJobsPutIsAwaitedNotRead) {
  FakeDispatcher d;
  d.answers = {Writing(3, 0), Writing(3, 0), Complete(10)};
  absl::StatusOr<PrecacheResult> r =
      RunPrecache(d.Calls(), absl::Seconds(10), absl::Milliseconds(1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(d.epochs_read.empty());
  EXPECT_FALSE(r->already_complete) << "it was not complete when asked first";
}

TEST(PrecacheTest, AnInvalidCacheIsAnErrorNamingIt) {
  FakeDispatcher d;
  GetOrCreateJobResponse invalid = Writing(3, 0);
  invalid.mutable_cache()->set_invalid(true);
  invalid.mutable_cache()->set_invalid_reason("chunk 4 forged");
  d.answers = {invalid};
  absl::StatusOr<PrecacheResult> r = RunPrecache(d.Calls(), absl::Seconds(10));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("cache k is invalid (chunk 4 forged)"));
}

TEST(PrecacheTest, APutThatNeverCompletesRunsIntoTheDeadline) {
  FakeDispatcher d;
  d.answers = {Writing(3, 0)};
  absl::StatusOr<PrecacheResult> r =
      RunPrecache(d.Calls(), absl::Milliseconds(30), absl::Milliseconds(5));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(PrecacheTest, AJobThatCachesNothingIsRefused) {
  FakeDispatcher d;
  GetOrCreateJobResponse none = Answer(0);
  none.clear_cache_key();
  d.answers = {none};
  EXPECT_EQ(RunPrecache(d.Calls(), absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PrecacheTest, TheJobNameNamesPolicySeedAndDataset) {
  EXPECT_EQ(PrecacheJobName("abc", JobCachePolicy::kAtMark, 11), "precache/at_mark/11/abc");
}

}  // namespace
}  // namespace granary
