#include "security/peer_identity.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpc/grpc_security_constants.h"

namespace granary {
namespace {

constexpr absl::string_view kWorkerPrefix = "granary://worker/";
constexpr absl::string_view kClientPrefix = "granary://client/";

}  // namespace

std::string PeerIdentity::ToString() const {
  switch (role) {
    case Role::kWorker:
      return absl::StrCat("worker '", name, "'");
    case Role::kClient:
      return absl::StrCat("client '", name, "'");
    case Role::kNone:
      break;
  }
  return "a peer without a Granary certificate";
}

std::string WorkerIdentityUri(absl::string_view worker_id) {
  return absl::StrCat(kWorkerPrefix, worker_id);
}

std::string ClientIdentityUri(absl::string_view name) { return absl::StrCat(kClientPrefix, name); }

std::optional<PeerIdentity> ParseIdentityUri(absl::string_view uri) {
  for (const auto& [prefix, role] : {std::pair{kWorkerPrefix, PeerIdentity::Role::kWorker},
                                     std::pair{kClientPrefix, PeerIdentity::Role::kClient}}) {
    if (absl::StartsWith(uri, prefix) && uri.size() > prefix.size() &&
        !absl::StrContains(uri.substr(prefix.size()), '/')) {
      return PeerIdentity{role, std::string(uri.substr(prefix.size()))};
    }
  }
  return std::nullopt;
}

PeerIdentity IdentityOf(const grpc::AuthContext& context) {
  if (!context.IsPeerAuthenticated()) return {};
  for (const grpc::string_ref& san : context.FindPropertyValues(GRPC_X509_SAN_PROPERTY_NAME)) {
    if (std::optional<PeerIdentity> identity =
            ParseIdentityUri(absl::string_view(san.data(), san.size()))) {
      return *identity;
    }
  }
  return {};
}

absl::Status RequireWorker(const PeerIdentity& peer, absl::string_view worker_id,
                           absl::string_view rpc) {
  if (peer.role == PeerIdentity::Role::kNone) {
    return absl::UnauthenticatedError(
        absl::StrCat(rpc, " is for workers: present a worker certificate (SECURITY.md)"));
  }
  if (peer.role != PeerIdentity::Role::kWorker || peer.name != worker_id) {
    return absl::PermissionDeniedError(
        absl::StrCat(rpc, " as worker '", worker_id, "' refused: the caller is ", peer.ToString()));
  }
  return absl::OkStatus();
}

absl::Status RequireClient(const PeerIdentity& peer, absl::string_view rpc) {
  if (peer.role == PeerIdentity::Role::kNone && !peer.refusal.empty()) {
    return absl::UnauthenticatedError(absl::StrCat(rpc, " refused: ", peer.refusal));
  }
  if (peer.role == PeerIdentity::Role::kNone) {
    return absl::UnauthenticatedError(
        absl::StrCat(rpc, " is for clients: present a client certificate (SECURITY.md)"));
  }
  if (peer.role != PeerIdentity::Role::kClient) {
    return absl::PermissionDeniedError(
        absl::StrCat(rpc, " is for clients, and the caller is ", peer.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace granary
