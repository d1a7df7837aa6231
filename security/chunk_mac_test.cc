#include "security/chunk_mac.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>

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
  ChunkMac mac = ChunkMac::ForNewChunk(key, task, first);
  for (const std::string& record : records) mac.Add(record);
  return mac.Finish();
}

// Whether `stored` is the MAC of these records, as a reader checks it.
bool Checks(const ChunkMacKey& key, int64_t task, int64_t first,
            const std::vector<std::string>& records, const std::string& stored) {
  ChunkMac mac = ChunkMac::ToCheck(key, task, first, stored);
  for (const std::string& record : records) mac.Add(record);
  return ChunkMac::Equal(mac.Finish(), stored);
}

std::string LittleEndian(uint64_t value) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
  return out;
}

// cache/FORMAT.md's definition, computed in one call to OpenSSL: AES-256-GMAC under `nonce` of
// each length-prefixed piece (the identity, then every record), and the MAC the nonce + tag.
std::string FormatMac(const ChunkMacKey& key, const std::string& nonce, int64_t task, int64_t first,
                      const std::vector<std::string>& records) {
  const std::string identity = "granary cache chunk v2" + LittleEndian(task) + LittleEndian(first);
  std::string input = LittleEndian(identity.size()) + identity;
  for (const std::string& record : records) input += LittleEndian(record.size()) + record;
  EVP_MAC* gmac = EVP_MAC_fetch(nullptr, "GMAC", nullptr);
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(gmac);
  char cipher[] = "AES-256-GCM";
  std::string iv = nonce;
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_CIPHER, cipher, 0),
      OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_IV, iv.data(), iv.size()), OSSL_PARAM_END};
  unsigned char tag[16];
  size_t size = 0;
  const bool ok = EVP_MAC_init(ctx, reinterpret_cast<const unsigned char*>(key.bytes().data()), 32,
                               params) == 1 &&
                  EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(input.data()),
                                 input.size()) == 1 &&
                  EVP_MAC_final(ctx, tag, &size, sizeof(tag)) == 1;
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(gmac);
  if (!ok) return "GMAC failed";
  return nonce + std::string(reinterpret_cast<const char*>(tag), size);
}

TEST(ChunkMacTest, CoversTheKeyTheChunkIdentityAndEveryRecordBoundary) {
  const ChunkMacKey key = KeyOf('k');
  const std::string mac = MacOf(key, 7, 100, {"ab", "c"});
  EXPECT_EQ(mac.size(), ChunkMac::kMacBytes);
  EXPECT_TRUE(Checks(key, 7, 100, {"ab", "c"}, mac));
  EXPECT_FALSE(Checks(KeyOf('j'), 7, 100, {"ab", "c"}, mac));
  EXPECT_FALSE(Checks(key, 8, 100, {"ab", "c"}, mac));
  EXPECT_FALSE(Checks(key, 7, 101, {"ab", "c"}, mac));
  EXPECT_FALSE(Checks(key, 7, 100, {"a", "bc"}, mac));  // same bytes, other records
  EXPECT_FALSE(Checks(key, 7, 100, {"ab"}, mac));
  EXPECT_FALSE(Checks(key, 7, 100, {"ab", "d"}, mac));
  EXPECT_FALSE(Checks(key, 7, 100, {"c", "ab"}, mac));
}

TEST(ChunkMacTest, EveryNewChunkDrawsItsOwnNonce) {
  const ChunkMacKey key = KeyOf('k');
  const std::string a = MacOf(key, 7, 100, {"ab"});
  const std::string b = MacOf(key, 7, 100, {"ab"});
  EXPECT_NE(a.substr(0, ChunkMac::kNonceBytes), b.substr(0, ChunkMac::kNonceBytes));
  EXPECT_TRUE(Checks(key, 7, 100, {"ab"}, a));
  EXPECT_TRUE(Checks(key, 7, 100, {"ab"}, b));
}

TEST(ChunkMacTest, IsTheFormatsGmacWhateverTheRecordSizes) {
  // Records below and above the size ChunkMac gathers before handing them to OpenSSL, enough of
  // them to cross its buffer several times.
  std::vector<std::string> records;
  for (int i = 0; i < 40; ++i) {
    const size_t size = (i % 5 == 0) ? 100000 + i : (i % 3 == 0 ? 4096 + i % 2 : 7 * i + 1);
    records.push_back(std::string(size, static_cast<char>('a' + i % 26)));
  }
  records.push_back("");
  const ChunkMacKey key = KeyOf('q');
  const std::string mac = MacOf(key, 3, 4096, records);
  EXPECT_EQ(mac, FormatMac(key, mac.substr(0, ChunkMac::kNonceBytes), 3, 4096, records));
}

TEST(ChunkMacTest, ATamperedNonceTagOrOldFormatMacFails) {
  const ChunkMacKey key = KeyOf('k');
  const std::vector<std::string> records = {"x", std::string(10000, 'y')};
  const std::string mac = MacOf(key, 1, 0, records);
  for (size_t at :
       {size_t{0}, ChunkMac::kNonceBytes - 1, ChunkMac::kNonceBytes, ChunkMac::kMacBytes - 1}) {
    std::string flipped = mac;
    flipped[at] ^= 1;
    EXPECT_FALSE(Checks(key, 1, 0, records, flipped)) << "byte " << at << " flipped";
  }
  // A 32-byte MAC of the HMAC-SHA256 format before this one, or a MAC cut short.
  EXPECT_FALSE(Checks(key, 1, 0, records, mac + std::string(4, '\0')));
  EXPECT_FALSE(Checks(key, 1, 0, records, mac.substr(0, ChunkMac::kMacBytes - 1)));
  EXPECT_FALSE(Checks(key, 1, 0, records, ""));
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
  EXPECT_FALSE(ChunkMac::Equal(mac, mac.substr(0, ChunkMac::kMacBytes - 1)));
  EXPECT_FALSE(ChunkMac::Equal(mac, ""));
  std::string flipped = mac;
  flipped[ChunkMac::kMacBytes - 1] ^= 1;
  EXPECT_FALSE(ChunkMac::Equal(mac, flipped));
}

}  // namespace
}  // namespace granary
