// LocalWorkers' failures, each an error naming what is wrong (the starts that work are tested
// on real processes in tests/local_workers_process_test.cc).
#include "client/local_workers.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

TEST(LocalWorkersBinaryTest, AConfiguredBinaryIsTheOnlyCandidate) {
  ::setenv("GRANARY_BINARY", "/bin/true", 1);
  const absl::StatusOr<std::string> missing = LocalWorkersBinary("/no/such/granary");
  EXPECT_TRUE(absl::IsFailedPrecondition(missing.status())) << missing.status();
  EXPECT_THAT(missing.status().message(), HasSubstr("/no/such/granary is not executable"));
  EXPECT_THAT(missing.status().message(), HasSubstr("ClientOptions.granary_binary"));
  // Not configured: $GRANARY_BINARY.
  const absl::StatusOr<std::string> from_env = LocalWorkersBinary("");
  ASSERT_TRUE(from_env.ok()) << from_env.status();
  EXPECT_EQ(*from_env, "/bin/true");
  ::unsetenv("GRANARY_BINARY");
}

TEST(LocalWorkersTest, AWorkerThatDoesNotStartIsUnavailableNamingIt) {
  LocalWorkersOptions options;
  options.binary = "/bin/false";
  options.dispatcher_address = "127.0.0.1:9";
  options.job_id = 3;
  options.consumer = 1;
  options.count = 2;
  const absl::StatusOr<std::unique_ptr<LocalWorkers>> workers = LocalWorkers::Start(options);
  EXPECT_TRUE(absl::IsUnavailable(workers.status())) << workers.status();
  EXPECT_THAT(workers.status().message(), HasSubstr("-j3c1-0"));
  EXPECT_THAT(workers.status().message(), HasSubstr("exited with code 1"));
}

TEST(LocalWorkersTest, ANonExecutableBinaryIsFailedPrecondition) {
  testing::ScopedTempDir dir;
  const std::string text = dir.Join("granary");
  std::ofstream(text) << "not a program\n";
  ASSERT_EQ(::chmod(text.c_str(), 0644), 0);
  LocalWorkersOptions options;
  options.binary = text;
  options.count = 1;
  const absl::StatusOr<std::unique_ptr<LocalWorkers>> workers = LocalWorkers::Start(options);
  EXPECT_TRUE(absl::IsFailedPrecondition(workers.status())) << workers.status();
  EXPECT_THAT(workers.status().message(), HasSubstr(text));
}

}  // namespace
}  // namespace granary
