#include "obs/structured_log.h"

#include "gtest/gtest.h"

namespace granary {
namespace {

constexpr int64_t kTime = int64_t{1795680908} * 1000000 + 123456;  // 2026-11-26T08:15:08.123456Z

TEST(StructuredLogTest, TextLinesNameLevelTimeComponentWorkerJobAndTask) {
  EXPECT_EQ(FormatLogLine(false, {"worker", "w1"}, 1, kTime, "task_run.cc:59", 3, 12, "slow"),
            "W2026-11-26T08:15:08.123456Z worker worker=w1 job=3 task=12 task_run.cc:59] slow\n");
  EXPECT_EQ(FormatLogLine(false, {"dispatcher", ""}, 0, kTime, "a.cc:1", 0, 0, "up"),
            "I2026-11-26T08:15:08.123456Z dispatcher a.cc:1] up\n");
}

TEST(StructuredLogTest, JsonLinesAreOneEscapedObject) {
  EXPECT_EQ(FormatLogLine(true, {"worker", "w\"1"}, 2, kTime, "x.cc:2", 3, 0, "bad\n\"file\"\x01"),
            "{\"ts\":\"2026-11-26T08:15:08.123456Z\",\"level\":\"ERROR\",\"component\":\"worker\","
            "\"worker\":\"w\\\"1\",\"job\":3,\"src\":\"x.cc:2\",\"msg\":"
            "\"bad\\n\\\"file\\\"\\u0001\"}\n");
}

TEST(StructuredLogTest, AnUnknownFormatIsRefusedByName) {
  const absl::Status s = InstallStructuredLog("xml", {"worker", ""});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--log_format 'xml'"), std::string::npos) << s;
}

TEST(StructuredLogTest, ScopedContextsNestAndRestore) {
  EXPECT_EQ(ScopedLogContext::Current(), std::make_pair(int64_t{0}, int64_t{0}));
  {
    ScopedLogContext outer(1, 2);
    {
      ScopedLogContext inner(3, 4);
      EXPECT_EQ(ScopedLogContext::Current(), std::make_pair(int64_t{3}, int64_t{4}));
    }
    EXPECT_EQ(ScopedLogContext::Current(), std::make_pair(int64_t{1}, int64_t{2}));
  }
  EXPECT_EQ(ScopedLogContext::Current(), std::make_pair(int64_t{0}, int64_t{0}));
}

}  // namespace
}  // namespace granary
