// ShmServer: the worker's end of the shared-memory transport (transport/FORMAT.md, "Shared
// memory"). For a client on the worker's host, element images live in memfd segments
// (shm_backing.h); the GetElements answer names an element's segment and size instead of
// carrying its bytes, and the client maps the segment copy-on-write and views the element there.
//
// Walkthrough.
//  * The worker listens on the abstract Unix socket named after a nonce it draws and its address
//    (shm_protocol.h), and registers the nonce with the dispatcher, which hands it to clients
//    with the worker's address. A client that connects gets a session id and the worker's pid
//    (kHello) and names the session in its GetElements requests — if it runs as the worker's
//    user or root (SO_PEERCRED): segments hold the elements of every task, so only a process
//    that could read the worker's memory anyway may map them; any other is disconnected and
//    reads over TCP, where capabilities guard each task (SECURITY.md). The client checks the
//    other way round (ShmClient::Connect): the listener must be of its user or root and the
//    process its hello names, or it is not the worker.
//  * Answering a request of session S, the worker calls Hold(S, image) for each element in a
//    segment: S now holds a reference to the image, so its segment is not reused however the
//    worker's window moves on. Hold fails for a session that is gone; that element then travels
//    over TCP.
//  * The client asks for the segment's descriptor (kFetch), which the worker sends only for a
//    segment the session holds (kSegment + SCM_RIGHTS), maps it copy-on-write (the trainer may
//    write into its views; the segment never changes) and hands out views.
//  * When the client drops the element (the trainer is done with its views), it sends kRelease
//    and the session's hold goes. When the client dies, its socket closes and every hold of its
//    session goes with it; when the worker dies, the kernel closes everything, and the client's
//    mappings stay valid (the memory lives while it is mapped) until it drops them.
//
// Thread-safe; one thread serves the socket.
#ifndef GRANARY_TRANSPORT_SHM_SERVER_H_
#define GRANARY_TRANSPORT_SHM_SERVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "transport/buffer_pool.h"

namespace granary {

class ShmServer {
 public:
  // Listens for clients of the worker at `worker_address`, under a fresh nonce (nonce()).
  // Unavailable naming the socket when it cannot (Unix sockets are unavailable), or naming
  // getrandom when no nonce can be drawn (NewShmNonce).
  static absl::StatusOr<std::unique_ptr<ShmServer>> Start(const std::string& worker_address);
  // Closes every session (their holds go) and stops serving.
  ~ShmServer();
  ShmServer(const ShmServer&) = delete;
  ShmServer& operator=(const ShmServer&) = delete;

  // Records that session `session` holds `image` until it releases it. False (nothing held) when
  // the session is not connected or the image is not in a segment.
  bool Hold(uint64_t session, const BufferRef& image) ABSL_LOCKS_EXCLUDED(mu_);

  struct Stats {
    int64_t sessions = 0;
    int64_t holds = 0;  // references held for clients, over all sessions
  };
  Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);

  // The nonce in the socket's name, for the worker to register (RegisterWorkerRequest).
  const std::string& nonce() const { return nonce_; }

 private:
  struct Session {
    int socket = -1;
    // Segment id -> one reference per hold.
    std::map<uint64_t, std::vector<BufferRef>> holds;
  };

  ShmServer(std::string nonce, int listener, int wake_read, int wake_write);
  void Serve();
  void Accept() ABSL_LOCKS_EXCLUDED(mu_);
  // Handles one message of the session; false when the session is over.
  bool Handle(uint64_t session) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string nonce_;
  const int listener_;
  const int wake_read_;
  const int wake_write_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, Session> sessions_ ABSL_GUARDED_BY(mu_);
  uint64_t session_base_;
  uint64_t next_session_ = 1;  // Serve() thread only
  std::thread thread_;
};

}  // namespace granary

#endif  // GRANARY_TRANSPORT_SHM_SERVER_H_
