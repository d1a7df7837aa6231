#include "common/durability_model.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

class DurabilityModelTest : public ::testing::Test {
 protected:
  void Write(const std::string& path, const std::string& data) {
    ASSERT_TRUE(WriteStringToFile(env_, path, data, /*sync=*/false).ok());
  }
  std::string Read(const std::string& path) { return ReadFileToString(env_, path).value(); }

  Env* const env_ = Env::Default();
  testing::ScopedTempDir dir_;
  DurabilityModel model_;
};

TEST_F(DurabilityModelTest, TruncatesToTheSyncedLengthAndReportsTheBytes) {
  const std::string path = dir_.Join("log");
  model_.Created(path);
  model_.DirSynced(dir_.path());
  Write(path, "acknowledged|lost");
  model_.Synced(path, 12);
  const PowerLossReport report = model_.Apply(env_, std::nullopt).value();
  EXPECT_EQ(Read(path), "acknowledged");
  EXPECT_EQ(report.files_cut, 1);
  EXPECT_EQ(report.bytes_dropped, 5);
  EXPECT_EQ(report.creations_undone, 0);
}

TEST_F(DurabilityModelTest, RevertsAnInPlaceFileToItsSyncedContent) {
  const std::string path = dir_.Join("slots");
  Write(path, "AAAABBBB");
  model_.SyncedContent(path, "AAAABBBB");
  Write(path, "CCCCBBBB");  // overwritten in place, never synced
  const PowerLossReport report = model_.Apply(env_, std::nullopt).value();
  EXPECT_EQ(Read(path), "AAAABBBB");
  EXPECT_EQ(report.files_reverted, 1);
}

TEST_F(DurabilityModelTest, UndoesCreationsAndRenamesWhoseDirectoryWasNotSynced) {
  const std::string kept = dir_.Join("kept");
  const std::string tmp = dir_.Join("tmp");
  const std::string renamed = dir_.Join("renamed");
  model_.Created(kept);
  Write(kept, "k");
  model_.Synced(kept, 1);
  model_.DirSynced(dir_.path() + "/");  // spelled with a trailing slash: the same directory
  model_.Created(tmp);
  Write(tmp, "t");
  model_.Synced(tmp, 1);
  ASSERT_TRUE(env_->RenameFile(tmp, renamed).ok());
  model_.Renamed(tmp, renamed);
  model_.Created(dir_.Join("never"));
  Write(dir_.Join("never"), "n");
  const PowerLossReport report = model_.Apply(env_, std::nullopt).value();
  EXPECT_EQ(Read(kept), "k");
  EXPECT_FALSE(env_->FileExists(renamed));
  EXPECT_FALSE(env_->FileExists(tmp));  // the rename was undone, then its creation
  EXPECT_FALSE(env_->FileExists(dir_.Join("never")));
  EXPECT_EQ(report.renames_undone, 1);
  EXPECT_EQ(report.creations_undone, 2);
}

TEST_F(DurabilityModelTest, TornWritesKeepTheSyncedPrefixAndPartOfTheTail) {
  const std::string synced(5000, 's');
  const std::string tail(9000, 'u');
  bool some_tail_kept = false;
  bool some_garbled = false;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const std::string path = dir_.Join("torn");
    Write(path, synced + tail);
    model_.Synced(path, synced.size());
    const PowerLossReport report = model_.Apply(env_, seed).value();
    const std::string after = Read(path);
    ASSERT_GE(after.size(), synced.size()) << "seed " << seed;
    ASSERT_LE(after.size(), synced.size() + tail.size()) << "seed " << seed;
    EXPECT_EQ(after.substr(0, synced.size()), synced) << "seed " << seed;
    EXPECT_EQ(report.bytes_dropped, static_cast<int64_t>(synced.size() + tail.size() - after.size()))
        << "seed " << seed;
    const std::string kept = after.substr(synced.size());
    if (!kept.empty()) some_tail_kept = true;
    if (kept != tail.substr(0, kept.size())) {
      some_garbled = true;
      EXPECT_EQ(report.files_garbled, 1) << "seed " << seed;
      // Only the last 4 KiB block of what survives is garbled.
      const size_t block = std::max(synced.size(), (after.size() - 1) / 4096 * 4096);
      EXPECT_EQ(after.substr(synced.size(), block - synced.size()),
                tail.substr(0, block - synced.size()))
          << "seed " << seed;
    }
  }
  EXPECT_TRUE(some_tail_kept);
  EXPECT_TRUE(some_garbled);
}

TEST_F(DurabilityModelTest, TheSameTornSeedTearsTheSameWay) {
  std::string results[2];
  for (std::string& result : results) {
    const std::string path = dir_.Join("torn");
    Write(path, std::string(10000, 'x'));
    model_.Synced(path, 100);
    ASSERT_TRUE(model_.Apply(env_, 7).ok());
    result = Read(path);
  }
  EXPECT_EQ(results[0], results[1]);
}

TEST_F(DurabilityModelTest, ApplyForgetsWhatItApplied) {
  const std::string path = dir_.Join("f");
  model_.Created(path);
  Write(path, "abc");
  ASSERT_TRUE(model_.Apply(env_, std::nullopt).ok());
  EXPECT_FALSE(env_->FileExists(path));
  Write(path, "written after the power loss");
  const PowerLossReport report = model_.Apply(env_, std::nullopt).value();
  EXPECT_EQ(Read(path), "written after the power loss");
  EXPECT_EQ(report.creations_undone, 0);
}

}  // namespace
}  // namespace granary
