#include "common/grpc_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace granary {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  if (message.size() > kMaxWireStatusMessage) {
    const size_t cut = message.size() - (kMaxWireStatusMessage - 32);
    message.resize(kMaxWireStatusMessage - 32);
    absl::StrAppend(&message, "... (", cut, " bytes cut)");
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message);
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace granary
