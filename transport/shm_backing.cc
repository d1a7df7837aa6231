#include "transport/shm_backing.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace granary {

bool MemfdBacking::Available() {
  const int fd = ::memfd_create("granary-probe", MFD_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

absl::StatusOr<MemoryBlock> MemfdBacking::Map(size_t capacity) {
  const int fd = ::memfd_create("granary-element", MFD_CLOEXEC);
  if (fd < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("memfd_create for a shared element buffer: ", std::strerror(errno)));
  }
  if (::ftruncate(fd, static_cast<off_t>(capacity)) != 0) {
    const int error = errno;
    ::close(fd);
    return absl::ResourceExhaustedError(absl::StrCat(
        "sizing a shared element buffer to ", capacity, " bytes: ", std::strerror(error)));
  }
  void* data = ::mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const int error = errno;
    ::close(fd);
    return absl::ResourceExhaustedError(absl::StrCat(
        "mapping a shared element buffer of ", capacity, " bytes: ", std::strerror(error)));
  }
  return MemoryBlock{static_cast<char*>(data), capacity, fd, next_segment_id_++};
}

void MemfdBacking::Unmap(const MemoryBlock& block) {
  ::munmap(block.data, block.capacity);
  ::close(block.fd);
}

}  // namespace granary
