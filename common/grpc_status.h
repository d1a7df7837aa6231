// Converting between absl::Status (used everywhere inside Granary) and grpc::Status (on the
// wire). Codes map one to one; messages are kept.
#ifndef GRANARY_COMMON_GRPC_STATUS_H_
#define GRANARY_COMMON_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace granary {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace granary

#endif  // GRANARY_COMMON_GRPC_STATUS_H_
