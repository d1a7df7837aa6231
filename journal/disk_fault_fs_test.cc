#include "journal/disk_fault_fs.h"

#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "journal/journal.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// A real journal in a temporary directory whose RocksDB files go through a DiskFaultFileSystem
// following a real control file.
class DiskFaultFileSystemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    journal_dir_ = dir_.Join("journal");
    absl::StatusOr<std::unique_ptr<DiskFaultControl>> control =
        DiskFaultControl::Open(dir_.Join("faults"));
    ASSERT_TRUE(control.ok()) << control.status();
    control_ = *std::move(control);
    options_.file_system =
        std::make_shared<DiskFaultFileSystem>(rocksdb::FileSystem::Default(), control_.get());
  }

  // Sets the faults and waits until the control file was surely re-read.
  void SetFaults(const std::string& text) {
    ASSERT_TRUE(ReplaceDiskFaultControlFile(dir_.Join("faults"), text).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
  }

  std::unique_ptr<Journal> Open() {
    absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Open(journal_dir_, options_);
    EXPECT_TRUE(journal.ok()) << journal.status();
    return journal.ok() ? *std::move(journal) : nullptr;
  }

  // Appends "record <i>" for i in [from, to), each acknowledged.
  static void AppendAcknowledged(Journal& journal, int from, int to) {
    for (int i = from; i < to; ++i) {
      absl::StatusOr<uint64_t> seq = journal.Append(absl::StrCat("record ", i));
      ASSERT_TRUE(seq.ok()) << seq.status();
      ASSERT_EQ(*seq, static_cast<uint64_t>(i));
    }
  }

  // Reopens the journal on a healthy disk: records 1..acknowledged are there, in order, and at
  // most the one failed append after them ("failed").
  void ExpectAcknowledgedRecovered(int acknowledged) {
    SetFaults("");
    std::unique_ptr<Journal> journal = Open();
    ASSERT_NE(journal, nullptr);
    absl::StatusOr<Journal::Recovered> recovered = journal->Recover();
    ASSERT_TRUE(recovered.ok()) << recovered.status();
    ASSERT_GE(recovered->records.size(), static_cast<size_t>(acknowledged));
    ASSERT_LE(recovered->records.size(), static_cast<size_t>(acknowledged) + 1);
    for (int i = 1; i <= acknowledged; ++i) {
      EXPECT_EQ(recovered->records[i - 1],
                std::make_pair(static_cast<uint64_t>(i), absl::StrCat("record ", i)));
    }
    if (recovered->records.size() > static_cast<size_t>(acknowledged)) {
      EXPECT_EQ(recovered->records.back().second, "failed");
    }
  }

  testing::ScopedTempDir dir_;
  std::string journal_dir_;
  std::unique_ptr<DiskFaultControl> control_;
  JournalOptions options_;
};

// An EIO on the WAL's write or sync: the append fails (indeterminate), the journal refuses every
// later write (fail-stop), and a reopen on the healed disk finds every acknowledged record.
class DiskFaultFileSystemWalTest : public DiskFaultFileSystemTest,
                                   public ::testing::WithParamInterface<const char*> {};

TEST_P(DiskFaultFileSystemWalTest, EioFailsTheAppendStopsTheJournalAndLosesNothingAcknowledged) {
  {
    std::unique_ptr<Journal> journal = Open();
    ASSERT_NE(journal, nullptr);
    AppendAcknowledged(*journal, 1, 6);
    SetFaults(absl::StrCat("eio ", GetParam(), " ", journal_dir_, "\n"));
    absl::StatusOr<uint64_t> failed = journal->Append("failed");
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
    EXPECT_THAT(failed.status().message(), HasSubstr("Input/output error (injected by"));
    SetFaults("");
    absl::StatusOr<uint64_t> later = journal->Append("later");
    EXPECT_EQ(later.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(journal->last_sequence(), 5u);
  }
  ExpectAcknowledgedRecovered(5);
}

INSTANTIATE_TEST_SUITE_P(WriteAndSync, DiskFaultFileSystemWalTest,
                         ::testing::Values("write", "sync"));

TEST_F(DiskFaultFileSystemTest, StalledSyncDelaysTheAppendWhichSucceeds) {
  std::unique_ptr<Journal> journal = Open();
  ASSERT_NE(journal, nullptr);
  AppendAcknowledged(*journal, 1, 3);
  SetFaults(absl::StrCat("stall sync ", journal_dir_, " 500ms\n"));
  const auto start = std::chrono::steady_clock::now();
  AppendAcknowledged(*journal, 3, 4);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  journal.reset();
  ExpectAcknowledgedRecovered(3);
}

TEST_F(DiskFaultFileSystemTest, EioReadFailsTheOpenNamingTheFileAndHealedItRecoversAll) {
  {
    std::unique_ptr<Journal> journal = Open();
    ASSERT_NE(journal, nullptr);
    AppendAcknowledged(*journal, 1, 4);
  }
  SetFaults(absl::StrCat("eio read ", journal_dir_, "\n"));
  absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Open(journal_dir_, options_);
  ASSERT_FALSE(journal.ok());
  EXPECT_THAT(journal.status().message(), HasSubstr(journal_dir_));
  EXPECT_THAT(journal.status().message(), HasSubstr("Input/output error (injected by"));
  ExpectAcknowledgedRecovered(3);
}

}  // namespace
}  // namespace granary
