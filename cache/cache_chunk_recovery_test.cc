// The worker's MAC check of a Get task's chunks (CacheChunkRecovery::StartMacCheck); its
// recomputation runs against a real dispatcher in tests/cache_process_test.cc.
#include "cache/cache_chunk_recovery.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int64_t kTask = 5;

ChunkMacKey KeyOf(char fill) {
  return ChunkMacKey::Derive(CapabilityKey::FromBytes(std::string(32, fill)).value());
}

// A manifest entry for `records` with the MAC a worker holding `key` wrote.
CacheChunk ChunkOf(const ChunkMacKey& key, const std::vector<std::string>& records) {
  CacheChunk chunk;
  chunk.set_path("/cache/k/5-0-100-2.chunk");
  chunk.set_task_id(kTask);
  chunk.set_first_index(100);
  chunk.set_num_elements(static_cast<int64_t>(records.size()));
  ChunkMac mac = ChunkMac::ForNewChunk(key, kTask, 100);
  for (const std::string& record : records) mac.Add(record);
  chunk.set_mac(mac.Finish());
  return chunk;
}

// The verdict of the worker's check, under `key`, of `records` against `chunk`.
absl::Status Check(const ChunkMacKey& key, const CacheChunk& chunk,
                   const std::vector<std::string>& records) {
  const CacheChunkRecovery guard(/*dispatcher=*/nullptr, kTask, /*generation=*/1, key,
                                 /*registries=*/nullptr);
  const std::unique_ptr<CacheChunkGuard::MacCheck> check = guard.StartMacCheck(chunk);
  for (const std::string& record : records) check->Add(record);
  return check->Finish();
}

TEST(CacheChunkRecoveryTest, AcceptsTheChunkItsClusterWrote) {
  const std::vector<std::string> records = {"first", std::string(70000, 'x')};
  EXPECT_TRUE(Check(KeyOf('k'), ChunkOf(KeyOf('k'), records), records).ok());
}

TEST(CacheChunkRecoveryTest, RefusesAChunkWrittenUnderAnotherKeyOrChanged) {
  const std::vector<std::string> records = {"first", "second"};
  const CacheChunk chunk = ChunkOf(KeyOf('k'), records);
  for (const absl::Status& status :
       {Check(KeyOf('t'), chunk, records), Check(KeyOf('k'), chunk, {"first", "secont"})}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_THAT(status.message(), AllOf(HasSubstr("/cache/k/5-0-100-2.chunk"),
                                        HasSubstr("its MAC is not the manifest's")));
  }
}

TEST(CacheChunkRecoveryTest, NamesAManifestMacOfTheOlderFormat) {
  const std::vector<std::string> records = {"first", "second"};
  CacheChunk chunk = ChunkOf(KeyOf('k'), records);
  chunk.set_mac(std::string(32, 'h'));  // an HMAC-SHA256 MAC's size, before AES-GMAC
  const absl::Status status = Check(KeyOf('k'), chunk, records);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("/cache/k/5-0-100-2.chunk"), HasSubstr("MAC is 32 bytes, not 28"),
                    HasSubstr("older cache format")));
}

}  // namespace
}  // namespace granary
