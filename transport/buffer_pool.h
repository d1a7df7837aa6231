// Buffer and BufferPool: the memory an element's bytes live in on their way from the pipeline's
// batch to the trainer (DESIGN.md §9: every byte of an element is written once and read once).
//
// A Buffer is one contiguous block, 64-byte aligned (page aligned when pooled), written once by
// its producer (the batch op writing rows into an element's wire image, a client coalescing a
// received element) and then only read — by the worker's window, gRPC's send path, the trainer's
// tensor views. It is reference-counted (BufferRef is a shared_ptr): whoever still reads it keeps
// it alive, and the last reference returns it to its pool.
//
// Why a pool: a batch of 128 float32 224x224 crops is 77 MB. Allocated afresh, every batch pays
// a page fault and a page zeroing per 4 KiB (glibc maps allocations above its mmap threshold anew
// and its per-thread arenas release memory on their own terms), which measured as the batch and
// prefetch ops costing more than the normalize before them. A pool keeps freed blocks mapped and
// faulted in, and hands them out again for the next batch of the same size class.
//
// Blocks below kPooledBytes come from malloc (small elements gain nothing from a pool). Pooled
// blocks are rounded up to a size class (8 classes per power of two, so at most 12.5% is wasted)
// and come from the pool's Backing: anonymous memory (with transparent huge pages where the
// kernel offers them through madvise) or, for a worker serving clients on its host, shared memory
// segments (transport/shm_backing.h). Freed blocks are kept for reuse up to
// max_cached_bytes; beyond that they are unmapped.
//
// Thread-safe; a BufferRef may be released on any thread. The pool may be destroyed while
// buffers are alive: they are unmapped when released.
#ifndef GRANARY_TRANSPORT_BUFFER_POOL_H_
#define GRANARY_TRANSPORT_BUFFER_POOL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace granary {

inline constexpr size_t kBufferAlignment = 64;
// Smallest block the pool keeps for reuse; smaller ones are malloc'ed and freed.
inline constexpr size_t kPooledBytes = 256 << 10;

// A mapped block of memory, as a Backing provides it.
struct MemoryBlock {
  char* data = nullptr;
  size_t capacity = 0;
  // Shared-memory backings: the segment's file descriptor (owned by the backing) and its id,
  // unique within the backing. -1 and 0 otherwise.
  int fd = -1;
  uint64_t segment_id = 0;
};

// Where pooled blocks come from. Thread-safe.
class Backing {
 public:
  virtual ~Backing() = default;
  // A block of exactly `capacity` bytes (a multiple of the page size), page aligned.
  // ResourceExhausted naming the size when the memory cannot be had.
  virtual absl::StatusOr<MemoryBlock> Map(size_t capacity) = 0;
  virtual void Unmap(const MemoryBlock& block) = 0;
};

// Anonymous private memory (mmap), madvise'd for transparent huge pages.
std::unique_ptr<Backing> NewAnonymousBacking();

class Buffer {
 public:
  // The bytes asked for (size()), then up to capacity() that belong to the block.
  char* data() const { return block_.data; }
  size_t size() const { return size_; }
  size_t capacity() const { return block_.capacity; }
  absl::string_view bytes() const { return absl::string_view(block_.data, size_); }
  // Shared-memory buffers: the segment holding it (the buffer starts at its offset 0).
  int segment_fd() const { return block_.fd; }
  uint64_t segment_id() const { return block_.segment_id; }
  // Shrinks size() (e.g. after compressing into a buffer sized for the worst case).
  // REQUIRES: new_size <= size().
  void Truncate(size_t new_size) { size_ = new_size; }

 private:
  friend class BufferPool;
  Buffer(MemoryBlock block, size_t size) : block_(block), size_(size) {}
  MemoryBlock block_;
  size_t size_;
};

using BufferRef = std::shared_ptr<Buffer>;

struct BufferPoolOptions {
  // Freed pooled bytes kept mapped for reuse.
  size_t max_cached_bytes = size_t{512} << 20;
  // Null: anonymous memory.
  std::shared_ptr<Backing> backing;
  // Blocks below this size come from malloc (0: every block from the backing, which a
  // shared-memory pool needs: every buffer in a segment).
  size_t pooled_bytes = kPooledBytes;
};

class BufferPool {
 public:
  explicit BufferPool(BufferPoolOptions options = {});
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // The process's pool of anonymous memory, for everything that is not shared. Never destroyed.
  static BufferPool* Default();

  // A buffer of `size` bytes, contents unspecified. ResourceExhausted naming the size when the
  // memory cannot be had.
  absl::StatusOr<BufferRef> Allocate(size_t size);

  struct Stats {
    int64_t maps = 0;    // blocks mapped from the backing
    int64_t reuses = 0;  // allocations served from the cache
    size_t cached_bytes = 0;
    size_t live_bytes = 0;  // pooled blocks handed out and not yet released
  };
  Stats stats() const;

  // The pooled capacity a request of `size` bytes is rounded up to.
  static size_t SizeClass(size_t size);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace granary

#endif  // GRANARY_TRANSPORT_BUFFER_POOL_H_
