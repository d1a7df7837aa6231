// MemfdBacking: buffers in shared memory, for a worker whose clients run on its host (the
// shared-memory transport, transport/shm_server.h). Each block is a memfd of its own, mapped
// read-write here; its file descriptor is what the worker passes to a client, which maps the
// same pages copy-on-write. A memfd has no name in any filesystem: when the last process holding it
// (a descriptor or a mapping) exits, however it exits, its memory is gone — nothing is ever left
// behind in /dev/shm. Thread-safe.
#ifndef GRANARY_TRANSPORT_SHM_BACKING_H_
#define GRANARY_TRANSPORT_SHM_BACKING_H_

#include <atomic>
#include <memory>

#include "absl/status/statusor.h"
#include "transport/buffer_pool.h"

namespace granary {

class MemfdBacking final : public Backing {
 public:
  // Whether this kernel offers memfd_create (Linux 3.17 on); without it the worker serves over
  // TCP only.
  static bool Available();

  absl::StatusOr<MemoryBlock> Map(size_t capacity) override;
  void Unmap(const MemoryBlock& block) override;

 private:
  std::atomic<uint64_t> next_segment_id_{1};
};

}  // namespace granary

#endif  // GRANARY_TRANSPORT_SHM_BACKING_H_
