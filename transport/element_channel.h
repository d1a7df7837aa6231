// ElementChannel: the client's end of an element transport with one worker
// (transport/transport_registry.h has the transports and how one is chosen).
//
// A reader fetches in two steps, so that it can make its next call while it checks an answer:
// Fetch calls GetElements and receives the answer as it arrived (a ReceivedReply: gRPC's receive
// slices, transport/elements_reply.h); then, for each payload the reader accepts (in index
// order, exactly once), Receive makes it an image the reader views as an element — checking its
// checksum, decompressing it, or mapping the worker's memory it lies in. Every transport's
// element bytes are checked here, never by the reader.
//
// Thread-safe: a client's readers share one channel per worker.
#ifndef GRANARY_TRANSPORT_ELEMENT_CHANNEL_H_
#define GRANARY_TRANSPORT_ELEMENT_CHANNEL_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/client_context.h"
#include "proto/worker.pb.h"
#include "transport/elements_reply.h"

namespace granary {

// What Receive made of one payload.
struct ReceivedImage {
  enum class Outcome {
    // `bytes` is the element's image, its tensors aligned for viewing in place
    // (transport/element_image.h), kept alive by `owner`.
    kOk,
    // The bytes are not those sent (they fail their checksum): ask again.
    kChecksumMismatch,
    // It cannot be received now (no memory; the worker's segment or channel is gone): ask again.
    kRetry,
    // It arrived intact but is no element image: asking again yields the same bytes.
    kNotAnElement,
  };
  Outcome outcome = Outcome::kOk;
  // Why, unless kOk.
  absl::Status error;
  std::shared_ptr<const void> owner;
  absl::string_view bytes;
  // The bytes lie in the worker's memory, mapped: none travelled.
  bool mapped = false;
};

class ElementChannel {
 public:
  virtual ~ElementChannel() = default;

  // The transport's registered name ("tcp", "shm").
  virtual const char* name() const = 0;
  // Whether the channel stopped working for good (the worker restarted or died): the client
  // opens a new one.
  virtual bool broken() const { return false; }

  // Calls GetElements(`request`, with whatever this transport adds to it) on the worker and
  // receives its answer into `reply`. `context` (its deadline; TryCancel from another thread)
  // governs the call. The call's status, as absl codes (a malformed answer is OK here and
  // reported in reply->malformed).
  virtual absl::Status Fetch(grpc::ClientContext* context, const GetElementsRequest& request,
                             ReceivedReply* reply) = 0;
  // Makes `payload`, of an answer Fetch received, the element image it carries.
  virtual ReceivedImage Receive(const ReceivedPayload& payload) = 0;
};

}  // namespace granary

#endif  // GRANARY_TRANSPORT_ELEMENT_CHANNEL_H_
