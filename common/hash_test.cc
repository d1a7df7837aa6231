#include "common/hash.h"

#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace granary {
namespace {

// Known answers from the XXH64 specification, cross-checked against an independent
// implementation of the algorithm.
TEST(HashTest, Hash64MatchesXxh64KnownAnswers) {
  EXPECT_EQ(Hash64(""), 0xef46db3751d8e999ULL);
  EXPECT_EQ(Hash64("", 0), 0xef46db3751d8e999ULL);
  EXPECT_EQ(Hash64("abc"), 0x44bc2cf5ad770999ULL);
  EXPECT_EQ(Hash64("abc", 1), 0xbea9ca8199328908ULL);
  // Longer than 32 bytes: exercises the four-lane main loop.
  EXPECT_EQ(Hash64("The quick brown fox jumps over the lazy dog"), 0x0b242d361fda71bcULL);
}

TEST(HashTest, Hash64DependsOnSeedAndEveryByte) {
  const std::string data = "granary";
  EXPECT_NE(Hash64(data, 0), Hash64(data, 1));
  for (size_t i = 0; i < data.size(); ++i) {
    std::string changed = data;
    changed[i] ^= 1;
    EXPECT_NE(Hash64(changed), Hash64(data)) << "byte " << i;
  }
  // Embedded NULs count.
  EXPECT_NE(Hash64(std::string("a\0b", 3)), Hash64(std::string("a\0c", 3)));
}

TEST(HashTest, HashToHexIsLowerCaseAndZeroPaddedTo16Digits) {
  EXPECT_EQ(HashToHex(0), "0000000000000000");
  EXPECT_EQ(HashToHex(0xab), "00000000000000ab");
  EXPECT_EQ(HashToHex(0x0b242d361fda71bcULL), "0b242d361fda71bc");
  EXPECT_EQ(HashToHex(0xef46db3751d8e999ULL), "ef46db3751d8e999");
  EXPECT_EQ(HashToHex(~0ULL), "ffffffffffffffff");
}

TEST(HashTest, HashCombineIsDeterministicAndOrderSensitive) {
  EXPECT_EQ(HashCombine(1, 2), HashCombine(1, 2));
  EXPECT_NE(HashCombine(1, 2), HashCombine(2, 1));
  EXPECT_NE(HashCombine(1, 2), HashCombine(1, 3));
  EXPECT_NE(HashCombine(0, 0), 0u);
}

TEST(HashTest, StreamingHashOfNothingEqualsHashOfEmpty) {
  EXPECT_EQ(StreamingHash64().Digest(), Hash64(""));
  EXPECT_EQ(StreamingHash64(7).Digest(), Hash64("", 7));
}

TEST(HashTest, StreamingHashEqualsOneShotOverConcatenation) {
  std::string data;
  for (int i = 0; i < 200; ++i) data.push_back(static_cast<char>(i * 31 + 7));
  for (uint64_t seed : {0ULL, 42ULL}) {
    for (size_t a = 0; a <= data.size(); a += 13) {
      for (size_t b = a; b <= data.size(); b += 29) {
        StreamingHash64 h(seed);
        h.Update(data.substr(0, a));
        h.Update(data.substr(a, b - a));
        h.Update(data.substr(b));
        EXPECT_EQ(h.Digest(), Hash64(data, seed)) << "seed " << seed << " cuts " << a << "," << b;
      }
    }
  }
}

TEST(HashTest, StreamingDigestDoesNotConsumeState) {
  StreamingHash64 h;
  h.Update("abc");
  EXPECT_EQ(h.Digest(), Hash64("abc"));
  EXPECT_EQ(h.Digest(), Hash64("abc"));
  h.Update("def");
  EXPECT_EQ(h.Digest(), Hash64("abcdef"));
}

TEST(HashTest, UpdateU64HashesTheValuesLittleEndianBytes) {
  const uint64_t value = 0x0123456789abcdefULL;
  const char bytes[8] = {'\xef', '\xcd', '\xab', '\x89', '\x67', '\x45', '\x23', '\x01'};
  StreamingHash64 h;
  h.UpdateU64(value);
  EXPECT_EQ(h.Digest(), Hash64(std::string(bytes, 8)));
}

// The XXH3-64 known answer for empty input (xxhash's own test vectors), and a value that must
// differ from XXH64's: the data plane's checksums are XXH3, not XXH64.
TEST(HashTest, Hash3_64MatchesXxh3KnownAnswerAndDiffersFromXxh64) {
  EXPECT_EQ(Hash3_64(""), 0x2d06800538d394c2ULL);
  EXPECT_NE(Hash3_64("abc"), Hash64("abc"));
  EXPECT_NE(Hash3_64("abc"), Hash3_64("abd"));
}

// Streaming over pieces of every size class XXH3 treats differently (<= 16, <= 128, <= 240
// bytes, and long inputs across its 1 KiB stripes) equals the one-shot hash.
TEST(HashTest, StreamingHash3EqualsOneShotOverConcatenation) {
  std::string data(5000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  for (size_t size : {0, 1, 16, 17, 128, 129, 240, 241, 1024, 1025, 5000}) {
    const std::string prefix = data.substr(0, size);
    for (size_t cut : {size_t{0}, size / 3, size}) {
      StreamingHash3 h;
      h.Update(absl::string_view(prefix).substr(0, cut));
      h.Update(absl::string_view(prefix).substr(cut));
      EXPECT_EQ(h.Digest(), Hash3_64(prefix)) << "size " << size << " cut " << cut;
    }
  }
}

}  // namespace
}  // namespace granary
