// ShmClient: the client's end of the shared-memory transport with one worker (shm_server.h has
// the walkthrough). Connect() succeeds only when the worker runs on this host (its abstract
// socket is reachable here) and the process listening there is that worker; otherwise the
// reader uses TCP.
//
// Take(segment, size) maps the named segment copy-on-write and returns an owner of the mapping:
// the element's views point into it (the trainer may write into them; a write copies the page
// into the trainer's own memory and never reaches the worker's segment), and when the last copy
// of the owner goes (the trainer dropped the element) the mapping is unmapped and the worker
// told that this session no longer holds the segment. The owner keeps the session (this ShmClient) alive, so the worker keeps the
// segment for it; if the worker dies the mapping stays valid (the memory lives while mapped) and
// the release is moot.
//
// Thread-safe.
#ifndef GRANARY_TRANSPORT_SHM_CLIENT_H_
#define GRANARY_TRANSPORT_SHM_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace granary {

class ShmClient : public std::enable_shared_from_this<ShmClient> {
 public:
  // How long Connect waits for the worker's hello by default.
  static constexpr absl::Duration kHelloTimeout = absl::Seconds(1);

  // Connects to the socket of the worker at `worker_address` that drew `nonce`
  // (TaskInfo.worker_shm_nonce) and takes the session its hello names. The process listening
  // there must run as this process' user or root and be the process the hello names (by
  // SO_PEERCRED): the socket's name may have been bound by another local process. Never waits
  // longer than `hello_timeout` (connect() does not block). Errors, each naming the socket:
  // Unavailable when nothing listens under that name here (the worker runs elsewhere or serves
  // no shared memory), the listener's backlog is full (it accepts nothing), or the listener
  // closed the connection (the worker refused this user); PermissionDenied when the listener is
  // not the worker (another user, or a hello naming another pid); DeadlineExceeded when no
  // hello came within `hello_timeout`; DataLoss for a malformed hello.
  static absl::StatusOr<std::shared_ptr<ShmClient>> Connect(
      const std::string& worker_address, const std::string& nonce,
      absl::Duration hello_timeout = kHelloTimeout);
  ~ShmClient();
  ShmClient(const ShmClient&) = delete;
  ShmClient& operator=(const ShmClient&) = delete;

  uint64_t session() const { return session_; }
  // Whether the channel to the worker failed or the worker closed it (it died or restarted):
  // connect anew. A worker restarted at the same address knows nothing of this session, so
  // until the reader connects anew everything would come by bytes.
  bool broken() const;

  // The first `size` bytes of segment `segment`, which the worker named in an answer to this
  // session, mapped privately (writable, copy-on-write: no write reaches the segment); the owner keeps them mapped (and held by the worker). Unavailable
  // when the channel is broken, NotFound when the worker holds no such segment for us, DataLoss
  // when `size` exceeds the segment.
  absl::StatusOr<std::shared_ptr<const void>> Take(uint64_t segment, size_t size,
                                                   absl::string_view* bytes);

 private:
  ShmClient(int socket, uint64_t session) : socket_(socket), session_(session) {}
  // Connect's checks on `socket`: connects it and returns the session the listener's hello
  // names. Errors as Connect's, without the socket's name.
  static absl::StatusOr<uint64_t> Greet(int socket, const std::string& worker_address,
                                        const std::string& nonce, absl::Duration hello_timeout);
  void Release(uint64_t segment);

  const int socket_;
  const uint64_t session_;
  mutable std::atomic<bool> broken_{false};
  // One kFetch / kSegment exchange at a time.
  absl::Mutex fetch_mu_;
};

}  // namespace granary

#endif  // GRANARY_TRANSPORT_SHM_CLIENT_H_
