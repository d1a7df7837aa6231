#include "security/chunk_mac.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace granary {
namespace {

ChunkMacKey KeyOf(char fill) {
  return ChunkMacKey::Derive(CapabilityKey::FromBytes(std::string(32, fill)).value());
}

std::string MacOf(const ChunkMacKey& key, int64_t task, int64_t first,
                  const std::vector<std::string>& records) {
  ChunkMac mac(key, task, first);
  for (const std::string& record : records) mac.Add(record);
  return mac.Finish();
}

TEST(ChunkMacTest, CoversTheKeyTheChunkIdentityAndEveryRecordBoundary) {
  const ChunkMacKey key = KeyOf('k');
  const std::string mac = MacOf(key, 7, 100, {"ab", "c"});
  EXPECT_EQ(mac.size(), ChunkMac::kMacBytes);
  EXPECT_EQ(mac, MacOf(key, 7, 100, {"ab", "c"}));  // deterministic
  EXPECT_NE(mac, MacOf(KeyOf('j'), 7, 100, {"ab", "c"}));
  EXPECT_NE(mac, MacOf(key, 8, 100, {"ab", "c"}));
  EXPECT_NE(mac, MacOf(key, 7, 101, {"ab", "c"}));
  EXPECT_NE(mac, MacOf(key, 7, 100, {"a", "bc"}));  // same bytes, other records
  EXPECT_NE(mac, MacOf(key, 7, 100, {"ab"}));
  EXPECT_NE(mac, MacOf(key, 7, 100, {"ab", "d"}));
  EXPECT_NE(mac, MacOf(key, 7, 100, {"c", "ab"}));
}

TEST(ChunkMacTest, TheChunkKeyIsNotTheCapabilityKey) {
  const CapabilityKey capability = CapabilityKey::FromBytes(std::string(32, 'k')).value();
  const ChunkMacKey key = ChunkMacKey::Derive(capability);
  EXPECT_EQ(key.bytes().size(), 32u);
  EXPECT_NE(key.bytes(), capability.bytes());
}

TEST(ChunkMacTest, EqualComparesWholeMacs) {
  const std::string mac = MacOf(KeyOf('k'), 1, 0, {"x"});
  EXPECT_TRUE(ChunkMac::Equal(mac, mac));
  EXPECT_FALSE(ChunkMac::Equal(mac, mac.substr(0, 31)));
  EXPECT_FALSE(ChunkMac::Equal(mac, ""));
  std::string flipped = mac;
  flipped[31] ^= 1;
  EXPECT_FALSE(ChunkMac::Equal(mac, flipped));
}

}  // namespace
}  // namespace granary
