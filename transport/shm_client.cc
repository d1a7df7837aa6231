#include "transport/shm_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
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

absl::StatusOr<std::shared_ptr<ShmClient>> ShmClient::Connect(const std::string& worker_address,
                                                              const std::string& nonce,
                                                              absl::Duration hello_timeout) {
  // Non-blocking for connect(): a Unix-socket connect to a listener whose backlog is full
  // would otherwise wait, with no time limit, for it to accept (Greet).
  const int socket = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (socket < 0) {
    return absl::UnavailableError(
        absl::StrCat("shared-memory transport: socket: ", std::strerror(errno)));
  }
  const std::string name = ShmSocketName(worker_address, nonce);
  absl::StatusOr<uint64_t> session = Greet(socket, worker_address, nonce, hello_timeout);
  if (!session.ok()) {
    ::close(socket);
    return Annotate(session.status(),
                    absl::StrCat("shared-memory socket ", name, " of worker ", worker_address));
  }
  return std::shared_ptr<ShmClient>(new ShmClient(socket, *session));
}

absl::StatusOr<uint64_t> ShmClient::Greet(int socket, const std::string& worker_address,
                                          const std::string& nonce, absl::Duration hello_timeout) {
  socklen_t length;
  const sockaddr_un address = ShmSocketAddress(worker_address, nonce, &length);
  // On a non-blocking Unix socket connect() never waits: it connects at once or fails, EAGAIN
  // when the listener's backlog is full.
  if (::connect(socket, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    if (errno == EAGAIN) {
      return absl::UnavailableError(
          "the listener's backlog is full: it accepts no connections now");
    }
    return absl::UnavailableError(
        absl::StrCat("nothing listens there on this host: ", std::strerror(errno)));
  }
  // Blocking from here on: the hello wait below is bounded by poll, and Take's exchanges wait
  // for the worker's answers.
  const int flags = ::fcntl(socket, F_GETFL);
  if (flags < 0 || ::fcntl(socket, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return absl::UnavailableError(absl::StrCat("fcntl: ", std::strerror(errno)));
  }
  // The listener's credentials, as of its listen(): whoever bound the name.
  ucred peer{};
  socklen_t peer_length = sizeof(peer);
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &peer, &peer_length) != 0) {
    return absl::UnavailableError(absl::StrCat("SO_PEERCRED: ", std::strerror(errno)));
  }
  if (peer.uid != ::geteuid() && peer.uid != 0) {
    return absl::PermissionDeniedError(absl::StrCat("bound by process ", peer.pid, " of uid ",
                                                    peer.uid, ", neither uid ", ::geteuid(),
                                                    " nor root"));
  }
  const absl::Time deadline = absl::Now() + hello_timeout;
  pollfd readable{socket, POLLIN, 0};
  int ready = 0;
  for (absl::Time now = absl::Now(); now < deadline; now = absl::Now()) {
    const absl::Duration left = absl::Ceil(deadline - now, absl::Milliseconds(1));
    ready = ::poll(&readable, 1, static_cast<int>(absl::ToInt64Milliseconds(left)));
    if (ready > 0 || (ready < 0 && errno != EINTR)) break;
  }
  if (ready < 0) return absl::UnavailableError(absl::StrCat("poll: ", std::strerror(errno)));
  if (ready == 0) {
    return absl::DeadlineExceededError(absl::StrCat("process ", peer.pid, " sent no hello within ",
                                                    absl::FormatDuration(hello_timeout)));
  }
  ShmMessage hello;
  int fd;
  RETURN_IF_ERROR(ReceiveShmMessage(socket, &hello, &fd));
  if (fd >= 0) ::close(fd);
  if (hello.type != ShmMessage::kHello || hello.a == 0) {
    return absl::DataLossError(absl::StrCat("process ", peer.pid, " sent message type ", hello.type,
                                            " instead of a hello"));
  }
  if (hello.b != static_cast<uint64_t>(peer.pid)) {
    return absl::PermissionDeniedError(
        absl::StrCat("the hello names process ", hello.b, " but process ", peer.pid, " listens"));
  }
  return hello.a;
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
