// Converting between absl::Status (used everywhere inside Granary) and grpc::Status (on the
// wire). Codes map one to one; messages are kept, but a message going on the wire is cut to
// kMaxWireStatusMessage bytes: it travels as an HTTP/2 header, and one past gRPC's 8 KiB
// metadata limit (an error quoting a hostile 1 MiB id, say) fails the call with "received
// initial metadata size exceeds limit" and leaves the channel unable to read later answers.
#ifndef GRANARY_COMMON_GRPC_STATUS_H_
#define GRANARY_COMMON_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace granary {

inline constexpr size_t kMaxWireStatusMessage = 1024;

// The message is cut to kMaxWireStatusMessage bytes, ending "… (N bytes cut)".
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace granary

#endif  // GRANARY_COMMON_GRPC_STATUS_H_
