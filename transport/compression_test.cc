#include "transport/compression.h"

#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

std::string Data(size_t size, bool compressible, uint32_t seed) {
  std::mt19937 random(seed);
  std::string data(size, '\0');
  for (size_t i = 0; i < size; ++i) {
    data[i] = compressible ? static_cast<char>((i / 64) % 7) : static_cast<char>(random());
  }
  return data;
}

TEST(CompressionTest, EveryCompressionRoundTripsAndCompressibleDataShrinks) {
  const uint32_t seed = std::random_device()();
  for (Compression c : {COMPRESSION_LZ4, COMPRESSION_ZSTD}) {
    for (size_t size : {size_t{0}, size_t{1}, size_t{1000}, size_t{3} << 20}) {
      for (bool compressible : {true, false}) {
        const std::string in = Data(size, compressible, seed);
        auto out = Compress(c, in, BufferPool::Default());
        ASSERT_TRUE(out.ok()) << out.status();
        if (compressible && size > 1000) {
          EXPECT_LT((*out)->size(), size / 10);
        }
        std::string back(size, 'z');
        ASSERT_TRUE(Decompress(c, (*out)->bytes(), back.data(), back.size()).ok())
            << CompressionName(c) << " " << size << " seed " << seed;
        EXPECT_EQ(back, in) << CompressionName(c) << " " << size << " seed " << seed;
      }
    }
  }
}

TEST(CompressionTest, CorruptOrMissizedInputIsDataLossNamingTheCompression) {
  const std::string in = Data(100000, true, 1);
  for (Compression c : {COMPRESSION_LZ4, COMPRESSION_ZSTD}) {
    auto out = Compress(c, in, BufferPool::Default());
    ASSERT_TRUE(out.ok());
    std::string back(in.size(), '\0');
    // One byte short, and one byte more, than the element is.
    absl::Status short_size = Decompress(c, (*out)->bytes(), back.data(), back.size() - 1);
    EXPECT_TRUE(absl::IsDataLoss(short_size)) << short_size;
    EXPECT_THAT(short_size.message(), HasSubstr(std::string(CompressionName(c))));
    std::string bigger(in.size() + 1, '\0');
    EXPECT_TRUE(absl::IsDataLoss(Decompress(c, (*out)->bytes(), bigger.data(), bigger.size())));
    // Garbage.
    const std::string garbage = Data(5000, false, 2);
    EXPECT_TRUE(absl::IsDataLoss(Decompress(c, garbage, back.data(), back.size())));
  }
  EXPECT_TRUE(absl::IsDataLoss(Decompress(static_cast<Compression>(9), in, nullptr, 0)));
}

TEST(CompressionTest, NamesRoundTripAndUnknownNamesAreNamed) {
  for (Compression c : {COMPRESSION_NONE, COMPRESSION_LZ4, COMPRESSION_ZSTD}) {
    auto back = CompressionFromName(CompressionName(c));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, c);
  }
  EXPECT_THAT(CompressionFromName("gzip").status().message(),
              HasSubstr("compression 'gzip' is none of none, lz4, zstd"));
}

}  // namespace
}  // namespace granary
