#include "transport/buffer_pool.h"

#include <cstring>
#include <thread>

#include "gtest/gtest.h"

namespace granary {
namespace {

TEST(BufferPoolTest, ReleasedBlockIsReusedForTheNextBufferOfItsSizeClass) {
  BufferPool pool;
  auto first = pool.Allocate(3 << 20);
  ASSERT_TRUE(first.ok()) << first.status();
  char* const data = (*first)->data();
  std::memset(data, 0x5a, (*first)->size());  // Faulted in: a reuse must not map again.
  first->reset();
  // A slightly different size of the same class gets the very same block.
  auto second = pool.Allocate((3 << 20) - 1000);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)->data(), data);
  EXPECT_EQ((*second)->size(), (3u << 20) - 1000);
  const BufferPool::Stats stats = pool.stats();
  EXPECT_EQ(stats.maps, 1);
  EXPECT_EQ(stats.reuses, 1);
  EXPECT_EQ(stats.live_bytes, BufferPool::SizeClass(3 << 20));
  EXPECT_EQ(stats.cached_bytes, 0u);
}

TEST(BufferPoolTest, BuffersAreAlignedWhetherPooledOrNot) {
  BufferPool pool;
  for (size_t size : {size_t{0}, size_t{1}, size_t{100}, kPooledBytes - 1, kPooledBytes,
                      size_t{5} << 20}) {
    auto buffer = pool.Allocate(size);
    ASSERT_TRUE(buffer.ok()) << size;
    EXPECT_EQ(reinterpret_cast<uintptr_t>((*buffer)->data()) % kBufferAlignment, 0u) << size;
    EXPECT_EQ((*buffer)->size(), size);
    EXPECT_GE((*buffer)->capacity(), size);
  }
}

TEST(BufferPoolTest, SizeClassesCoverTheRequestWithAtMostAnEighthWasted) {
  size_t previous = 0;
  for (size_t size = 1; size < (size_t{1} << 32); size = size * 3 / 2 + 1) {
    const size_t cls = BufferPool::SizeClass(size);
    EXPECT_GE(cls, size);
    EXPECT_GE(cls, previous) << "classes must not shrink as requests grow";
    if (size > (size_t{64} << 10)) {
      EXPECT_LE(cls, size + size / 8 + 4096) << size;
    }
    previous = cls;
  }
}

TEST(BufferPoolTest, FreedBlocksBeyondTheCacheLimitAreUnmapped) {
  BufferPool pool({.max_cached_bytes = size_t{2} << 20});
  std::vector<BufferRef> buffers;
  for (int i = 0; i < 4; ++i) {
    auto buffer = pool.Allocate(1 << 20);
    ASSERT_TRUE(buffer.ok());
    buffers.push_back(*buffer);
  }
  buffers.clear();
  const BufferPool::Stats stats = pool.stats();
  EXPECT_EQ(stats.live_bytes, 0u);
  EXPECT_LE(stats.cached_bytes, size_t{2} << 20);
  EXPECT_GT(stats.cached_bytes, 0u);
}

TEST(BufferPoolTest, ABufferOutlivesItsPoolAndMayBeReleasedOnAnotherThread) {
  BufferRef survivor;
  {
    BufferPool pool;
    auto buffer = pool.Allocate(1 << 20);
    ASSERT_TRUE(buffer.ok());
    survivor = *buffer;
    std::memset(survivor->data(), 1, survivor->size());
  }
  EXPECT_EQ(survivor->data()[12345], 1);
  std::thread([&survivor] { survivor.reset(); }).join();
  EXPECT_EQ(survivor, nullptr);
}

}  // namespace
}  // namespace granary
