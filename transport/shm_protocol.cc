#include "transport/shm_protocol.h"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace granary {

namespace {

// The name without its leading NUL, cut to what sun_path holds after that NUL.
std::string AbstractName(const std::string& worker_address, const std::string& nonce) {
  const std::string name = absl::StrCat("granary-shm:", nonce, ":", worker_address);
  return name.substr(0, sizeof(sockaddr_un::sun_path) - 1);
}

}  // namespace

absl::StatusOr<std::string> NewShmNonce() {
  uint64_t random = 0;
  size_t filled = 0;
  while (filled < sizeof(random)) {
    const ssize_t n =
        ::getrandom(reinterpret_cast<char*>(&random) + filled, sizeof(random) - filled, 0);
    if (n > 0) {
      filled += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat(
          "shared-memory transport: drawing the socket nonce: getrandom: ", std::strerror(errno)));
    }
  }
  return absl::StrFormat("%016x", random);
}

std::string ShmSocketName(const std::string& worker_address, const std::string& nonce) {
  return "@" + AbstractName(worker_address, nonce);
}

sockaddr_un ShmSocketAddress(const std::string& worker_address, const std::string& nonce,
                             socklen_t* length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  // Abstract namespace: a leading NUL, then the name (not NUL-terminated).
  const std::string name = AbstractName(worker_address, nonce);
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return address;
}

absl::Status SendShmMessage(int socket, const ShmMessage& message, int fd) {
  iovec iov{const_cast<ShmMessage*>(&message), sizeof(message)};
  msghdr header{};
  header.msg_iov = &iov;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    header.msg_control = control;
    header.msg_controllen = sizeof(control);
    cmsghdr* cmsg = CMSG_FIRSTHDR(&header);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  }
  while (true) {
    if (::sendmsg(socket, &header, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(message))) {
      return absl::OkStatus();
    }
    if (errno != EINTR) {
      return absl::UnavailableError(
          absl::StrCat("shared-memory channel: send: ", std::strerror(errno)));
    }
  }
}

absl::Status ReceiveShmMessage(int socket, ShmMessage* message, int* fd) {
  *fd = -1;
  iovec iov{message, sizeof(*message)};
  msghdr header{};
  header.msg_iov = &iov;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  header.msg_control = control;
  header.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = ::recvmsg(socket, &header, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return absl::UnavailableError("shared-memory channel: closed by the peer");
  if (n < 0) {
    return absl::UnavailableError(
        absl::StrCat("shared-memory channel: receive: ", std::strerror(errno)));
  }
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&header); cmsg != nullptr; cmsg = CMSG_NXTHDR(&header, cmsg)) {
    if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS) {
      std::memcpy(fd, CMSG_DATA(cmsg), sizeof(int));
    }
  }
  if (n != static_cast<ssize_t>(sizeof(*message)) || (header.msg_flags & MSG_TRUNC) != 0) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
    return absl::DataLossError(
        absl::StrCat("shared-memory channel: a message of ", n, " bytes, not ", sizeof(*message)));
  }
  return absl::OkStatus();
}

}  // namespace granary
