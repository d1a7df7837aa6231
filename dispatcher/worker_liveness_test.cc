// WorkerLiveness: a worker silent past the timeout is proposed lost; one heard from, or
// registered again meanwhile, is not.
#include "dispatcher/worker_liveness.h"

#include "testing/manual_clock_env.h"
#include "dispatcher/memory_log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::ElementsAre;

constexpr int64_t kTimeoutMs = 100;

class WorkerLivenessTest : public ::testing::Test {
 protected:
  void Register(const std::string& id) {
    Update update;
    update.mutable_register_worker()->set_worker_id(id);
    update.mutable_register_worker()->set_address(id + ":1");
    ASSERT_TRUE(core_->Propose(update).ok());
    liveness_.Seen(id);
  }
  bool Lost(const std::string& id) {
    return core_->Read([&](const DispatcherState& s) { return s.FindWorker(id)->lost(); });
  }
  std::vector<std::string> Live() {
    return core_->Read(
        [&](const DispatcherState& s) { return liveness_.LiveWorkers(s, clock_.NowMicros()); });
  }

  std::unique_ptr<DispatcherCore> core_ = OpenMemoryCore(std::make_shared<LogContents>());
  ManualClockEnv clock_{Env::Default()};
  WorkerLiveness liveness_{core_.get(), &clock_, kTimeoutMs};
};

TEST_F(WorkerLivenessTest, ASilentWorkerIsProposedLostAndAHeardOneIsNot) {
  Register("a");
  Register("b");
  EXPECT_THAT(Live(), ElementsAre("a", "b"));
  clock_.AdvanceMicros(kTimeoutMs * 1000 / 2);
  liveness_.Seen("b");
  clock_.AdvanceMicros(kTimeoutMs * 1000 / 2 + 1);
  EXPECT_FALSE(liveness_.HeardWithin("a", clock_.NowMicros()));
  EXPECT_TRUE(liveness_.HeardWithin("b", clock_.NowMicros()));
  EXPECT_THAT(Live(), ElementsAre("b"));
  ASSERT_TRUE(liveness_.CheckLiveness().ok());
  EXPECT_TRUE(Lost("a"));
  EXPECT_FALSE(Lost("b"));
  // A lost worker is not proposed lost again.
  const uint64_t seq = core_->Read([](const DispatcherState& s) { return s.applied_seq(); });
  ASSERT_TRUE(liveness_.CheckLiveness().ok());
  EXPECT_EQ(core_->Read([](const DispatcherState& s) { return s.applied_seq(); }), seq);
}

TEST_F(WorkerLivenessTest, AfterARestartEveryKnownWorkerCountsAsFreshlySeen) {
  Register("a");
  clock_.AdvanceMicros(kTimeoutMs * 1000 + 1);
  WorkerLiveness restarted(core_.get(), &clock_, kTimeoutMs);
  EXPECT_FALSE(restarted.LastSeen("a").has_value());
  core_->Read([&](const DispatcherState& s) { restarted.SeeAll(s); });
  EXPECT_EQ(restarted.LastSeen("a"), clock_.NowMicros());
  ASSERT_TRUE(restarted.CheckLiveness().ok());
  EXPECT_FALSE(Lost("a"));
}

}  // namespace
}  // namespace granary
