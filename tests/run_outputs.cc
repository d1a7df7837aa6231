#include "tests/run_outputs.h"

#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/subprocess.h"
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

namespace {

// Runs `argv` to its end; false (with a gtest failure naming its output) unless it exits 0.
bool RunGranary(const std::vector<std::string>& argv) {
  Subprocess process(argv, Subprocess::Stderr::kMergeIntoStdout);
  const std::string output = process.ReadAll(std::chrono::seconds(120));
  const int exit_code = process.Wait();
  EXPECT_EQ(exit_code, 0) << output;
  return exit_code == 0;
}

}  // namespace

bool GenerateImagenet(const std::string& out, int64_t images) {
  return RunGranary({GRANARY_BINARY, "datagen", "imagenet", "--out=" + out,
                     absl::StrCat("--images=", images), "--files=4", "--size=16"});
}

std::map<int64_t, DigestLine> LocalDigests(const std::string& pipeline, int epochs, uint64_t seed,
                                           const std::string& cache_policy,
                                           const std::string& digest_path) {
  if (!RunGranary({GRANARY_BINARY, "local", "--pipeline=" + pipeline,
                   absl::StrCat("--epochs=", epochs), absl::StrCat("--seed=", seed),
                   "--cache_policy=" + cache_policy, "--digest_out=" + digest_path})) {
    return {};
  }
  return ReadDigests(digest_path);
}

}  // namespace granary::testing
