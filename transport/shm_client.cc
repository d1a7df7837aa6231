#include "transport/shm_client.h"

#include <poll.h>

#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "transport/shm_protocol.h"

namespace granary {
namespace {

// A private mapping of a segment's first `length` bytes, unmapped (and released) when gone.
struct Mapping {
  void* data = nullptr;
  size_t length = 0;
  std::function<void()> release;
  ~Mapping() {
    ::munmap(data, length);
    if (release) release();
  }
};

}  // namespace

absl::StatusOr<std::shared_ptr<ShmClient>> ShmClient::Connect(const std::string& worker_address) {
  const int socket = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (socket < 0) {
    return absl::UnavailableError(
        absl::StrCat("shared-memory transport: socket: ", std::strerror(errno)));
  }
  socklen_t length;
  const sockaddr_un address = ShmSocketAddress(worker_address, &length);
  if (::connect(socket, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    const int error = errno;
    ::close(socket);
    return absl::UnavailableError(absl::StrCat("no shared-memory transport to worker ",
                                               worker_address, " on this host: ",
                                               std::strerror(error)));
  }
  ShmMessage hello;
  int fd;
  if (absl::Status s = ReceiveShmMessage(socket, &hello, &fd); !s.ok()) {
    ::close(socket);
    return s;
  }
  if (fd >= 0) ::close(fd);
  if (hello.type != ShmMessage::kHello || hello.a == 0) {
    ::close(socket);
    return absl::UnavailableError(
        absl::StrCat("worker ", worker_address, ": unexpected shared-memory greeting"));
  }
  return std::shared_ptr<ShmClient>(new ShmClient(socket, hello.a));
}

ShmClient::~ShmClient() { ::close(socket_); }

bool ShmClient::broken() const {
  if (broken_.load()) return true;
  // The worker only ever writes in answer to a fetch; a hang-up means its end is closed.
  pollfd peer{socket_, POLLRDHUP, 0};
  if (::poll(&peer, 1, 0) == 1 && (peer.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
    broken_ = true;
  }
  return broken_.load();
}

absl::StatusOr<std::shared_ptr<const void>> ShmClient::Take(uint64_t segment, size_t size,
                                                            absl::string_view* bytes) {
  // The flag only, not broken()'s poll: a hung-up worker fails the exchange below anyway, and
  // this runs for every element.
  if (broken_.load()) return absl::UnavailableError("shared-memory channel to the worker is broken");
  ShmMessage reply;
  int fd = -1;
  {
    absl::MutexLock lock(&fetch_mu_);
    ShmMessage fetch;
    fetch.type = ShmMessage::kFetch;
    fetch.a = segment;
    absl::Status status = SendShmMessage(socket_, fetch);
    if (status.ok()) status = ReceiveShmMessage(socket_, &reply, &fd);
    if (!status.ok()) {
      broken_ = true;
      return status;
    }
  }
  if (reply.type != ShmMessage::kSegment || reply.a != segment || fd < 0) {
    if (fd >= 0) ::close(fd);
    if (reply.type == ShmMessage::kNoSegment) {
      return absl::NotFoundError(
          absl::StrCat("the worker holds no segment ", segment, " for this session"));
    }
    broken_ = true;
    return absl::UnavailableError("shared-memory channel: unexpected answer to a fetch");
  }
  if (size > reply.b) {
    ::close(fd);
    Release(segment);
    return absl::DataLossError(absl::StrCat("element of ", size, " bytes in segment ", segment,
                                            " of ", reply.b, " bytes"));
  }
  const size_t length = std::max<size_t>(size, 1);
  // Private (copy-on-write): the trainer may write into its views, and a write copies only the
  // page it touches into the trainer's own memory; the worker's segment never changes.
  // MAP_POPULATE: the pages are there already (the worker wrote them); mapping them all at once
  // is much cheaper than a fault per page as the trainer reads. It populates a mapping that is
  // read-only first, since populating a writable private one would copy every page; writing is
  // allowed after.
  void* data = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  int error = errno;
  if (data != MAP_FAILED && ::mprotect(data, length, PROT_READ | PROT_WRITE) != 0) {
    error = errno;
    ::munmap(data, length);
    data = MAP_FAILED;
  }
  ::close(fd);
  if (data == MAP_FAILED) {
    Release(segment);
    return absl::ResourceExhaustedError(
        absl::StrCat("mapping segment ", segment, ": ", std::strerror(error)));
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->data = data;
  mapping->length = length;
  // The mapping keeps the session alive: were it closed, the worker would drop its holds and
  // could reuse the segment under the trainer's views.
  mapping->release = [client = shared_from_this(), segment] { client->Release(segment); };
  *bytes = absl::string_view(static_cast<const char*>(data), size);
  return std::shared_ptr<const void>(mapping, data);
}

void ShmClient::Release(uint64_t segment) {
  if (broken_.load()) return;  // the flag only, as in Take
  ShmMessage release;
  release.type = ShmMessage::kRelease;
  release.a = segment;
  release.b = 1;
  if (!SendShmMessage(socket_, release).ok()) broken_ = true;
}

}  // namespace granary
