#include "cache/async_mac_check.h"

#include <deque>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

// Records what it is fed; Finish says OK when it was fed `expected`, in order.
class RecordingCheck : public CacheChunkGuard::MacCheck {
 public:
  RecordingCheck(std::vector<std::string>* fed, std::vector<std::string> expected)
      : fed_(fed), expected_(std::move(expected)) {}
  void Add(absl::string_view record) override { fed_->emplace_back(record); }
  absl::Status Finish() override {
    if (*fed_ == expected_) return absl::OkStatus();
    return absl::DataLossError(absl::StrCat("fed ", fed_->size(), " records"));
  }

 private:
  std::vector<std::string>* const fed_;
  const std::vector<std::string> expected_;
};

TEST(AsyncMacCheckTest, HashesEveryRecordInOrderBeforeFinishReturns) {
  std::deque<std::string> records;
  std::vector<std::string> expected;
  for (int i = 0; i < 1000; ++i) expected.push_back(std::string(i % 97, static_cast<char>(i)));
  std::vector<std::string> fed;
  AsyncMacCheck check(std::make_unique<RecordingCheck>(&fed, expected));
  for (const std::string& record : expected) {
    records.push_back(record);
    check.Add(records.back());
  }
  EXPECT_TRUE(check.Finish().ok());
  EXPECT_EQ(fed.size(), expected.size());
}

TEST(AsyncMacCheckTest, AWrongSequenceFailsWithTheChecksVerdict) {
  std::deque<std::string> records = {"a", "b"};
  std::vector<std::string> fed;
  AsyncMacCheck check(std::make_unique<RecordingCheck>(&fed, std::vector<std::string>{"a"}));
  for (const std::string& record : records) check.Add(record);
  const absl::Status finished = check.Finish();
  EXPECT_EQ(finished.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(finished.message(), "fed 2 records");
}

// Hashes slowly (1 ms a record).
class SlowCheck : public CacheChunkGuard::MacCheck {
 public:
  explicit SlowCheck(int* hashed) : hashed_(hashed) {}
  void Add(absl::string_view) override {
    absl::SleepFor(absl::Milliseconds(1));
    ++*hashed_;
  }
  absl::Status Finish() override { return absl::OkStatus(); }

 private:
  int* const hashed_;
};

// A load that fails midway (a damaged record) drops the check unfinished: it stops after the
// record it is hashing instead of hashing the 100 queued (100 ms).
TEST(AsyncMacCheckTest, DestroyedUnfinishedItStopsWithoutHashingTheRest) {
  int hashed = 0;
  {
    std::deque<std::string> records(100, std::string(16, 'x'));
    AsyncMacCheck check(std::make_unique<SlowCheck>(&hashed));
    for (const std::string& record : records) check.Add(record);
  }
  EXPECT_LT(hashed, 100);
}

}  // namespace
}  // namespace granary
