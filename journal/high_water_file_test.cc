#include "journal/high_water_file.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), bytes.size());
}

class HighWaterFileTest : public ::testing::Test {
 protected:
  std::optional<HighWater> ReadOk() {
    absl::StatusOr<std::optional<HighWater>> mark = HighWaterFile::Read(path_);
    EXPECT_TRUE(mark.ok()) << mark.status();
    return mark.ok() ? *mark : std::nullopt;
  }

  testing::ScopedTempDir dir_;
  const std::string path_ = dir_.Join("GRANARY-HIGH-WATER");
};

TEST_F(HighWaterFileTest, MissingFileIsNullopt) { EXPECT_FALSE(ReadOk().has_value()); }

TEST_F(HighWaterFileTest, AnchorThenUpdatesReadBackTheNewestMark) {
  absl::StatusOr<std::unique_ptr<HighWaterFile>> file = HighWaterFile::Anchor(path_, {5, 9});
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(std::filesystem::file_size(path_), HighWaterFile::kFileSize);
  std::optional<HighWater> mark = ReadOk();
  ASSERT_TRUE(mark.has_value());
  EXPECT_EQ(mark->seq, 5u);
  EXPECT_EQ(mark->wal_number, 9u);
  for (uint64_t seq = 6; seq <= 9; ++seq) {
    ASSERT_TRUE((*file)->Update({seq, 9}, /*sync=*/seq == 9).ok());
    mark = ReadOk();
    ASSERT_TRUE(mark.has_value());
    EXPECT_EQ(mark->seq, seq);
  }
  // Anchoring an existing file rewrites it in place.
  file = HighWaterFile::Anchor(path_, {9, 12});
  ASSERT_TRUE(file.ok()) << file.status();
  mark = ReadOk();
  ASSERT_TRUE(mark.has_value());
  EXPECT_EQ(mark->seq, 9u);
  EXPECT_EQ(mark->wal_number, 12u);
}

// A write torn by a crash damages one slot; the other holds the previous (smaller) mark.
TEST_F(HighWaterFileTest, TornSlotFallsBackToTheOtherSlot) {
  absl::StatusOr<std::unique_ptr<HighWaterFile>> file = HighWaterFile::Anchor(path_, {1, 4});
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Update({2, 4}, false).ok());  // Slot 0.
  ASSERT_TRUE((*file)->Update({3, 4}, false).ok());  // Slot 1.
  std::string bytes = ReadAll(path_);
  bytes[HighWaterFile::kSlotSize + 10] ^= 0x01;  // Tear slot 1 (seq 3).
  WriteAll(path_, bytes);
  std::optional<HighWater> mark = ReadOk();
  ASSERT_TRUE(mark.has_value());
  EXPECT_EQ(mark->seq, 2u);
}

TEST_F(HighWaterFileTest, BothSlotsDamagedIsDataLossNamingTheFile) {
  ASSERT_TRUE(HighWaterFile::Anchor(path_, {7, 4}).ok());
  std::string bytes = ReadAll(path_);
  bytes[3] ^= 0x01;
  bytes[HighWaterFile::kSlotSize + 3] ^= 0x01;
  WriteAll(path_, bytes);
  absl::StatusOr<std::optional<HighWater>> mark = HighWaterFile::Read(path_);
  EXPECT_EQ(mark.status().code(), absl::StatusCode::kDataLoss) << mark.status();
  EXPECT_THAT(std::string(mark.status().message()), HasSubstr(path_ + ": damaged"));
}

TEST_F(HighWaterFileTest, WrongSizeIsDataLossNamingTheFile) {
  ASSERT_TRUE(HighWaterFile::Anchor(path_, {7, 4}).ok());
  std::filesystem::resize_file(path_, HighWaterFile::kFileSize - 1);
  absl::StatusOr<std::optional<HighWater>> mark = HighWaterFile::Read(path_);
  EXPECT_EQ(mark.status().code(), absl::StatusCode::kDataLoss) << mark.status();
  EXPECT_THAT(std::string(mark.status().message()), HasSubstr(path_ + ": 63 bytes, expected 64"));
}

}  // namespace
}  // namespace granary
