#include "transport/buffer_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace granary {
namespace {

size_t PageSize() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

class AnonymousBacking final : public Backing {
 public:
  absl::StatusOr<MemoryBlock> Map(size_t capacity) override {
    void* data = ::mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
    if (data == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot map ", capacity, " bytes for an element buffer: ",
                       std::strerror(errno)));
    }
    // Fewer page faults and TLB misses for multi-megabyte batches; a no-op where the kernel
    // has transparent huge pages off.
    ::madvise(data, capacity, MADV_HUGEPAGE);
    return MemoryBlock{static_cast<char*>(data), capacity};
  }
  void Unmap(const MemoryBlock& block) override { ::munmap(block.data, block.capacity); }
};

}  // namespace

std::unique_ptr<Backing> NewAnonymousBacking() { return std::make_unique<AnonymousBacking>(); }

struct BufferPool::State {
  BufferPoolOptions options;
  absl::Mutex mu;
  bool closed ABSL_GUARDED_BY(mu) = false;
  // Free blocks by capacity.
  std::multimap<size_t, MemoryBlock> free ABSL_GUARDED_BY(mu);
  Stats stats ABSL_GUARDED_BY(mu);

  void Release(const MemoryBlock& block) {
    {
      absl::MutexLock lock(&mu);
      stats.live_bytes -= block.capacity;
      if (!closed && stats.cached_bytes + block.capacity <= options.max_cached_bytes) {
        free.emplace(block.capacity, block);
        stats.cached_bytes += block.capacity;
        return;
      }
    }
    options.backing->Unmap(block);
  }
};

BufferPool::BufferPool(BufferPoolOptions options) : state_(std::make_shared<State>()) {
  if (options.backing == nullptr) options.backing = NewAnonymousBacking();
  state_->options = std::move(options);
}

BufferPool::~BufferPool() {
  std::multimap<size_t, MemoryBlock> free;
  {
    absl::MutexLock lock(&state_->mu);
    state_->closed = true;
    free.swap(state_->free);
    state_->stats.cached_bytes = 0;
  }
  for (const auto& [capacity, block] : free) state_->options.backing->Unmap(block);
}

BufferPool* BufferPool::Default() {
  static BufferPool* const pool = new BufferPool();
  return pool;
}

size_t BufferPool::SizeClass(size_t size) {
  const size_t page = PageSize();
  size_t pages = (std::max<size_t>(size, 1) + page - 1) / page;
  // 8 classes per power of two: round `pages` up to a multiple of 2^(bits - 4).
  int bits = 0;
  while ((pages >> bits) > 1) ++bits;
  if (bits > 3) {
    const size_t step = size_t{1} << (bits - 3);
    pages = (pages + step - 1) / step * step;
  }
  return pages * page;
}

absl::StatusOr<BufferRef> BufferPool::Allocate(size_t size) {
  if (size < state_->options.pooled_bytes) {
    void* data = std::aligned_alloc(kBufferAlignment,
                                    (std::max<size_t>(size, 1) + kBufferAlignment - 1) /
                                        kBufferAlignment * kBufferAlignment);
    if (data == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", size, " bytes for an element buffer"));
    }
    MemoryBlock block{static_cast<char*>(data), size};
    return BufferRef(new Buffer(block, size), [](Buffer* buffer) {
      std::free(buffer->data());
      delete buffer;
    });
  }
  const size_t capacity = SizeClass(size);
  MemoryBlock block;
  bool reused = false;
  {
    absl::MutexLock lock(&state_->mu);
    auto it = state_->free.find(capacity);
    if (it != state_->free.end()) {
      block = it->second;
      state_->free.erase(it);
      state_->stats.cached_bytes -= capacity;
      ++state_->stats.reuses;
      reused = true;
    }
  }
  if (!reused) {
    absl::StatusOr<MemoryBlock> mapped = state_->options.backing->Map(capacity);
    if (!mapped.ok()) return mapped.status();
    block = *mapped;
  }
  {
    absl::MutexLock lock(&state_->mu);
    if (!reused) ++state_->stats.maps;
    state_->stats.live_bytes += capacity;
  }
  // The deleter keeps the pool's state alive: a buffer may outlive its BufferPool.
  return BufferRef(new Buffer(block, size), [state = state_](Buffer* buffer) {
    state->Release(buffer->block_);
    delete buffer;
  });
}

BufferPool::Stats BufferPool::stats() const {
  absl::MutexLock lock(&state_->mu);
  return state_->stats;
}

}  // namespace granary
