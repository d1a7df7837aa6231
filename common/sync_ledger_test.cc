#include "common/sync_ledger.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

class SyncLedgerTest : public ::testing::Test {
 protected:
  void Write(const std::string& path, const std::string& data) {
    ASSERT_TRUE(WriteStringToFile(Env::Default(), path, data, /*sync=*/false).ok());
  }
  std::string Read(const std::string& path) {
    return ReadFileToString(Env::Default(), path).value();
  }

  testing::ScopedTempDir dir_;
  const std::string ledger_path_ = dir_.Join("ledger");
};

TEST_F(SyncLedgerTest, EveryEventRoundTripsIncludingPathsWithSpacesAndNewlines) {
  const std::string odd = dir_.Join("a file\nwith \\ odd\tname");
  const std::string moved = dir_.Join("moved here");
  const std::string slots = dir_.Join("slots");
  {
    std::unique_ptr<SyncLedger> ledger = SyncLedger::Open(ledger_path_).value();
    ASSERT_TRUE(ledger->Created(odd).ok());
    Write(odd, "durable+lost");
    ASSERT_TRUE(ledger->Synced(odd, 7).ok());
    ASSERT_TRUE(ledger->DirSynced(dir_.path()).ok());
    ASSERT_TRUE(ledger->Renamed(odd, moved).ok());
    ASSERT_TRUE(Env::Default()->RenameFile(odd, moved).ok());
    Write(slots, std::string("\0\x01new", 5));
    ASSERT_TRUE(ledger->SyncedContent(slots, std::string("\0\x01old", 5)).ok());
    Write(dir_.Join("gone"), "g");
    ASSERT_TRUE(ledger->Truncated(dir_.Join("gone")).ok());
    ASSERT_TRUE(ledger->Deleted(dir_.Join("gone")).ok());
  }
  // Appending to an existing ledger (a second incarnation) adds no second header.
  {
    std::unique_ptr<SyncLedger> ledger = SyncLedger::Open(ledger_path_).value();
    const std::string late = dir_.Join("late");
    ASSERT_TRUE(ledger->Created(late).ok());
    Write(late, "l");
  }
  const PowerLossReport report = ApplyPowerLoss({ledger_path_}, std::nullopt).value();
  EXPECT_FALSE(Env::Default()->FileExists(moved));  // the rename was never dir-synced
  EXPECT_EQ(Read(odd), "durable");
  EXPECT_EQ(Read(slots), std::string("\0\x01old", 5));
  EXPECT_FALSE(Env::Default()->FileExists(dir_.Join("late")));
  EXPECT_EQ(report.renames_undone, 1);
  EXPECT_EQ(report.files_reverted, 1);
  EXPECT_EQ(report.creations_undone, 1);
  EXPECT_EQ(report.bytes_dropped, 5 + 1);  // "+lost", and the "l" of the deleted creation
}

TEST_F(SyncLedgerTest, LedgersReplayInOrderAndAMissingOneIsSkipped) {
  const std::string path = dir_.Join("data");
  Write(path, "0123456789");
  ASSERT_TRUE(SyncLedger::Open(dir_.Join("first")).value()->Synced(path, 4).ok());
  ASSERT_TRUE(SyncLedger::Open(dir_.Join("second")).value()->Synced(path, 8).ok());
  ASSERT_TRUE(
      ApplyPowerLoss({dir_.Join("first"), dir_.Join("missing"), dir_.Join("second")}, std::nullopt)
          .ok());
  EXPECT_EQ(Read(path), "01234567");
}

TEST_F(SyncLedgerTest, AnUnfinishedLastLineIsIgnored) {
  const std::string path = dir_.Join("data");
  Write(path, "0123456789");
  ASSERT_TRUE(SyncLedger::Open(ledger_path_).value()->Synced(path, 4).ok());
  // The writer was killed in the middle of the next line: its sync never returned.
  ASSERT_TRUE(
      WriteStringToFile(Env::Default(), ledger_path_, Read(ledger_path_) + "sync 9 " + path, false)
          .ok());
  ASSERT_TRUE(ApplyPowerLoss({ledger_path_}, std::nullopt).ok());
  EXPECT_EQ(Read(path), "0123");
}

TEST_F(SyncLedgerTest, AMalformedLineIsDataLossNamingTheLedgerAndLine) {
  for (const char* bad : {"sync x /a", "sync 3", "content 0 /a", "rename /a", "frobnicate /a",
                          "create \\q", "create /a /b"}) {
    SCOPED_TRACE(bad);
    ASSERT_TRUE(WriteStringToFile(Env::Default(), ledger_path_,
                                  absl::StrCat("granary-sync-ledger 1\ncreate /a\n", bad, "\n"),
                                  false)
                    .ok());
    const absl::Status status = ApplyPowerLoss({ledger_path_}, std::nullopt).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat(ledger_path_, " line 3")));
  }
}

TEST_F(SyncLedgerTest, AMissingOrUnknownHeaderIsDataLoss) {
  for (const std::string& text :
       {std::string("create /a\n"), std::string("granary-sync-ledger 2\n"), std::string("")}) {
    SCOPED_TRACE(text);
    ASSERT_TRUE(WriteStringToFile(Env::Default(), ledger_path_, text, false).ok());
    const absl::Status status = ApplyPowerLoss({ledger_path_}, std::nullopt).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(status.message(), HasSubstr("granary-sync-ledger 1"));
    EXPECT_THAT(status.message(), HasSubstr(ledger_path_));
  }
}

TEST_F(SyncLedgerTest, OpenNamesALedgerItCannotCreate) {
  const absl::Status status = SyncLedger::Open(dir_.Join("no/such/dir/ledger")).status();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(dir_.Join("no/such/dir/ledger")));
}

}  // namespace
}  // namespace granary
