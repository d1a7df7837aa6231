// The shared-memory transport's side channel (transport/FORMAT.md, "Shared memory"): how a
// worker and a client on the same host agree on sessions, pass segment file descriptors and
// release segments. It runs over a SOCK_SEQPACKET Unix socket in the abstract namespace, named
// after a nonce the worker draws at its start and the worker's address, so that:
//   * only a process on the worker's host (and network namespace) can connect: a client on
//     another host finds nothing under that name and uses TCP;
//   * the name vanishes with the worker's socket, however the worker dies — abstract sockets
//     leave no file behind;
//   * no other local process can take the name before the worker binds it: the nonce is
//     unknown until the worker registers it with the dispatcher, which tells clients
//     (TaskInfo.worker_shm_nonce). A process that binds a name seen before (the worker died) is
//     caught by the client's checks (ShmClient::Connect: SO_PEERCRED and the hello's pid).
// Every message is one ShmMessage (one datagram); a segment's descriptor travels as
// SCM_RIGHTS ancillary data of the kSegment message that answers a kFetch.
#ifndef GRANARY_TRANSPORT_SHM_PROTOCOL_H_
#define GRANARY_TRANSPORT_SHM_PROTOCOL_H_

#include <sys/socket.h>
#include <sys/un.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace granary {

struct ShmMessage {
  enum Type : uint32_t {
    kHello = 1,      // worker -> client on connect: a = session id, b = worker pid
    kFetch = 2,      // client -> worker: a = segment id
    kSegment = 3,    // worker -> client: a = segment id, b = its size; carries the fd
    kNoSegment = 4,  // worker -> client: a = segment id the session holds nothing of
    kRelease = 5,    // client -> worker: a = segment id, b = how many holds to release
  };
  uint32_t type = 0;
  uint32_t reserved = 0;
  uint64_t a = 0;
  uint64_t b = 0;
};

// A fresh nonce for a worker's socket name: 16 lowercase hex digits from the system's random
// source (getrandom). Unavailable naming getrandom and its errno when that source fails (e.g.
// ENOSYS on a kernel without it): the worker then serves no shared memory.
absl::StatusOr<std::string> NewShmNonce();

// The abstract socket name of the worker at `worker_address` (host:port as it registers) that
// drew `nonce`, "granary-shm:<nonce>:<worker_address>", cut to what a socket address holds
// (the nonce always fits). ShmSocketName shows it as `@name` for messages; ShmSocketAddress
// gives the address to bind or connect with, *length its length.
std::string ShmSocketName(const std::string& worker_address, const std::string& nonce);
sockaddr_un ShmSocketAddress(const std::string& worker_address, const std::string& nonce,
                             socklen_t* length);

// One message, with a file descriptor attached when fd >= 0. Errors name errno.
absl::Status SendShmMessage(int socket, const ShmMessage& message, int fd = -1);
// Blocks for one message; *fd receives an attached descriptor (-1 if none; the caller owns it).
// Unavailable when the peer has closed the socket.
absl::Status ReceiveShmMessage(int socket, ShmMessage* message, int* fd);

}  // namespace granary

#endif  // GRANARY_TRANSPORT_SHM_PROTOCOL_H_
