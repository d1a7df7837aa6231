#include "common/crc32c.h"

#include <string>

#include "gtest/gtest.h"

namespace granary::crc32c {
namespace {

// Check values from RFC 3720 (iSCSI), appendix B.4.
TEST(Crc32cTest, MatchesRfc3720Vectors) {
  EXPECT_EQ(Value(std::string(32, '\0')), 0x8a9136aau);
  EXPECT_EQ(Value(std::string(32, '\xff')), 0x62a8ab43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i);
  EXPECT_EQ(Value(ascending), 0x46dd794eu);
  EXPECT_EQ(Value("123456789"), 0xe3069283u);
}

TEST(Crc32cTest, ExtendEqualsWholeValue) {
  const std::string data = "hello, granary: exactly once through every failure";
  for (size_t cut = 0; cut <= data.size(); ++cut) {
    EXPECT_EQ(Extend(Value(data.substr(0, cut)), data.data() + cut, data.size() - cut),
              Value(data))
        << "cut at " << cut;
  }
}

TEST(Crc32cTest, MaskRoundTripsAndDiffers) {
  const uint32_t crc = Value("foo");
  EXPECT_NE(Mask(crc), crc);
  EXPECT_NE(Mask(Mask(crc)), crc);
  EXPECT_EQ(Unmask(Mask(crc)), crc);
  EXPECT_EQ(Unmask(Unmask(Mask(Mask(crc)))), crc);
}

}  // namespace
}  // namespace granary::crc32c
