#include "common/large_allocations.h"

#include <malloc.h>

namespace granary {

bool KeepLargeAllocationsInHeap() {
  const bool no_mmap = ::mallopt(M_MMAP_MAX, 0) == 1;
  const bool keep_freed = ::mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
  return no_mmap && keep_freed;
}

}  // namespace granary
