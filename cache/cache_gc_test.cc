#include "cache/cache_gc.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

class CacheGcTest : public ::testing::Test {
 protected:
  std::string Touch(const std::string& relative) {
    const std::string path = dir_.Join(relative);
    const std::string parent = path.substr(0, path.rfind('/'));
    EXPECT_TRUE(env_->CreateDirs(parent).ok());
    EXPECT_TRUE(WriteStringToFile(env_, path, "x", /*sync=*/false).ok());
    return path;
  }
  bool Exists(const std::string& relative) { return env_->FileExists(dir_.Join(relative)); }

  testing::ScopedTempDir dir_;
  Env* const env_ = Env::Default();
};

// Cache keys are 16 hex digits (cache/cache_policy.h).
constexpr char kComplete[] = "00000000000000aa";
constexpr char kWriting[] = "00000000000000bb";
constexpr char kForgotten[] = "00000000000000cc";

TEST_F(CacheGcTest, DeletesWhatNoCacheHoldsAndNothingElse) {
  std::map<std::string, CacheState> caches;
  CacheState& complete = caches[kComplete];
  complete.set_complete(true);
  Touch(absl::StrCat(kComplete, "/t1-g1-i0-n4.chunk"));
  // The manifest's path spells the root as the dispatcher was given it then: matched by name.
  complete.add_chunks()->set_path(
      absl::StrCat(dir_.path(), "/./", kComplete, "/t1-g1-i0-n4.chunk"));
  Touch(absl::StrCat(kComplete, "/t1-g0-i0-n4.chunk"));  // A run that lost its task.
  Touch(absl::StrCat(kComplete, "/t1-g1-i4-rxyz.tmp"));  // A temporary never committed.
  Touch(absl::StrCat(kComplete, "/notes.txt"));          // Not a name the cache writes.
  caches[kWriting];                                      // A Put still writing: untouched.
  Touch(absl::StrCat(kWriting, "/t2-g1-i0-rabc.tmp"));
  Touch(absl::StrCat(kForgotten, "/t3-g1-i0-n4.chunk"));  // An evicted cache's leftovers.
  Touch("probe-7-w1/point-0/t0-g0-i0-n32.chunk");         // A dead worker's probe.
  Touch("evicted-00000000000000dd-9/t4-g1-i0-n4.chunk");  // An eviction a crash interrupted.
  Touch("unrelated/t9-g1-i0-n1.chunk");                   // Not named like a cache: kept.

  absl::StatusOr<CacheGcCounts> counts = CollectCacheGarbage(env_, dir_.path(), caches);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->files, 5);
  EXPECT_EQ(counts->dirs, 4);  // kForgotten, the probe's point-0, the probe, the evicted one.
  EXPECT_TRUE(Exists(absl::StrCat(kComplete, "/t1-g1-i0-n4.chunk")));
  EXPECT_FALSE(Exists(absl::StrCat(kComplete, "/t1-g0-i0-n4.chunk")));
  EXPECT_FALSE(Exists(absl::StrCat(kComplete, "/t1-g1-i4-rxyz.tmp")));
  EXPECT_TRUE(Exists(absl::StrCat(kComplete, "/notes.txt")));
  EXPECT_TRUE(Exists(absl::StrCat(kWriting, "/t2-g1-i0-rabc.tmp")));
  EXPECT_FALSE(Exists(kForgotten));
  EXPECT_FALSE(Exists("probe-7-w1"));
  EXPECT_FALSE(Exists("evicted-00000000000000dd-9"));
  EXPECT_TRUE(Exists("unrelated/t9-g1-i0-n1.chunk"));

  // Nothing left to collect.
  counts = CollectCacheGarbage(env_, dir_.path(), caches);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->files + counts->dirs, 0);
}

TEST_F(CacheGcTest, DeleteCacheDirKeepsADirectoryHoldingForeignFiles) {
  Touch("00000000000000dd/t1-g1-i0-n4.chunk");
  Touch("00000000000000dd/README");
  absl::StatusOr<CacheGcCounts> counts = DeleteCacheDir(env_, dir_.Join("00000000000000dd"));
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->files, 1);
  EXPECT_EQ(counts->dirs, 0);
  EXPECT_TRUE(Exists("00000000000000dd/README"));
  // A directory that is not there is nothing to delete.
  EXPECT_TRUE(DeleteCacheDir(env_, dir_.Join("00000000000000ee")).ok());
}

}  // namespace
}  // namespace granary
