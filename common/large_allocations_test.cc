// KeepLargeAllocationsInHeap: a 64 MiB buffer comes from the heap (not its own mmap) and its
// memory stays with the process after free, ready for the next one.
#include "common/large_allocations.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "common/sanitizers.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

constexpr size_t kBatchBytes = size_t{64} << 20;

TEST(LargeAllocationsTest, ALargeBufferIsServedFromTheHeapAndKeptAfterFree) {
#if GRANARY_ASAN
  GTEST_SKIP() << "AddressSanitizer's allocator replaces glibc's malloc, which this test is about";
#endif
  {
    // glibc's default, for contrast: a buffer this large is a mapping of its own.
    void* mapped = std::malloc(kBatchBytes);
    ASSERT_NE(mapped, nullptr);
    EXPECT_GE(mallinfo2().hblkhd, kBatchBytes);
    std::free(mapped);
  }
  ASSERT_TRUE(KeepLargeAllocationsInHeap());
  const size_t mapped_before = mallinfo2().hblkhd;
  char* batch = static_cast<char*>(std::malloc(kBatchBytes));
  ASSERT_NE(batch, nullptr);
  std::memset(batch, 1, kBatchBytes);
  EXPECT_EQ(mallinfo2().hblkhd, mapped_before) << "the buffer was mmapped";
  std::free(batch);
  EXPECT_GE(mallinfo2().fordblks, kBatchBytes) << "the freed buffer went back to the kernel";
}

}  // namespace
}  // namespace granary
