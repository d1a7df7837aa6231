#include "tests/run_outputs.h"

#include "common/env.h"
#include "gtest/gtest.h"

namespace granary::testing {

std::map<int64_t, DigestLine> ReadDigests(const std::string& path) {
  auto digests = ReadDigestFile(Env::Default(), path);
  EXPECT_TRUE(digests.ok()) << digests.status();
  return digests.ok() ? *std::move(digests) : std::map<int64_t, DigestLine>();
}

RunPosition ReadRunPosition(const std::string& path) {
  auto position = ReadRunPositionFile(Env::Default(), path);
  return position.ok() ? *std::move(position) : RunPosition();
}

}  // namespace granary::testing
