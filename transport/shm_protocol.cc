#include "transport/shm_protocol.h"

#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace granary {

sockaddr_un ShmSocketAddress(const std::string& worker_address, socklen_t* length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  // Abstract namespace: a leading NUL, then the name (not NUL-terminated).
  const std::string name = "granary-shm:" + worker_address;
  const size_t n = std::min(name.size(), sizeof(address.sun_path) - 1);
  std::memcpy(address.sun_path + 1, name.data(), n);
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
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
