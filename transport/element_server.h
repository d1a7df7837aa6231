// ElementServer: the worker's end of an element transport (transport/transport_registry.h has
// the transports and how one is chosen).
//
// A worker holds one ElementServer for its life. For each GetElements call it takes the
// elements the task's window answers with (each an image the window holds by reference) and
// hands them to Prepare, which readies each to travel: by reference to memory the client maps
// (shared memory), or by bytes — the one place where bytes are compressed and hashed
// (PrepareBytes) — after which gRPC sends the ElementsReply without copying an element's bytes
// (transport/elements_reply.h). A transport whose memory clients map allocates the images too:
// pool() is where the worker's tasks get their buffers.
//
// Thread-safe: Prepare runs on every GetElements thread at once.
#ifndef GRANARY_TRANSPORT_ELEMENT_SERVER_H_
#define GRANARY_TRANSPORT_ELEMENT_SERVER_H_

#include "absl/status/status.h"
#include "proto/dispatcher.pb.h"
#include "proto/worker.pb.h"
#include "transport/buffer_pool.h"
#include "transport/elements_reply.h"

namespace granary {

class ElementServer {
 public:
  virtual ~ElementServer() = default;

  // The transport's registered name ("tcp", "shm").
  virtual const char* name() const = 0;
  // The pool the worker's element images are to come from, so that this transport can send
  // them (shared memory: memfd segments); null when any buffer will do. Owned by the server,
  // which outlives every image it allocated that the worker still holds (declare it first).
  virtual BufferPool* pool() { return nullptr; }
  // Adds what a client needs to reach this transport to the worker's registration (shared
  // memory: its socket's nonce).
  virtual void Advertise(RegisterWorkerRequest* /*request*/) const {}
  // Adds this transport's gauges to the worker's status (shared memory: sessions).
  virtual void AddStatus(GetWorkerStatusResponse* /*status*/) const {}

  // Readies `reply->elements`, the task window's answer to `request`, to be sent. Returns the
  // name of the transport that carried the answer, for TaskStatus.transport (a static string):
  // a transport that sends some elements by bytes names itself only when it carried at least
  // one. REQUIRES: CheckElementsRequest(request) is OK.
  virtual const char* Prepare(const GetElementsRequest& request, ElementsReply* reply) = 0;
};

// What every transport requires of a GetElements request before the task's window is read:
// InvalidArgument naming an unknown compression.
absl::Status CheckElementsRequest(const GetElementsRequest& request);

// Readies `element` to travel by bytes: compressed as `request` asks (when compressing fails it
// goes uncompressed, with a warning naming the task and index), and hashed — the checksum is
// the XXH3-64 of the bytes sent — unless it was already.
void PrepareBytes(const GetElementsRequest& request, ReplyElement& element);

}  // namespace granary

#endif  // GRANARY_TRANSPORT_ELEMENT_SERVER_H_
