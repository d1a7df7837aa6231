// PeerIdentity: who is calling, as proven by the peer's TLS certificate (SECURITY.md). A
// Granary certificate names its holder in a URI subject alternative name:
//   granary://worker/<worker id>   a worker (the dispatcher checks it registers as that id)
//   granary://client/<name>        a client (a trainer, `granary run`, an operator's tool)
// Only certificates verified against the cluster's CA reach the server (transport_security.h),
// so a peer cannot claim an identity its certificate does not name.
#ifndef GRANARY_SECURITY_PEER_IDENTITY_H_
#define GRANARY_SECURITY_PEER_IDENTITY_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/auth_context.h"

namespace granary {

struct PeerIdentity {
  enum class Role { kNone, kWorker, kClient };
  Role role = Role::kNone;
  std::string name;
  // With role kNone: why credentials the call did present proved no one ("the bearer token was
  // refused: ..."), never quoting them; empty when it presented none.
  std::string refusal;

  // "worker 'w0'", "client 'alice'" or "a peer without a Granary certificate".
  std::string ToString() const;
};

// The URI SAN of a worker's / a client's certificate.
std::string WorkerIdentityUri(absl::string_view worker_id);
std::string ClientIdentityUri(absl::string_view name);
// The URI SAN of a dispatcher's certificate: no identity ParseIdentityUri accepts, so a
// dispatcher's certificate can call no RPC.
inline constexpr char kDispatcherIdentityUri[] = "granary://dispatcher";

// The identity one URI SAN names, if it is a Granary identity with a non-empty name.
std::optional<PeerIdentity> ParseIdentityUri(absl::string_view uri);

// The identity of a call's peer: the first Granary URI among its certificate's subject
// alternative names, or role kNone (plain text, no certificate, or a certificate naming no
// Granary identity).
PeerIdentity IdentityOf(const grpc::AuthContext& context);

// What a call from `peer` may do when identities are enforced (TLS):
// Unauthenticated for a peer without an identity; PermissionDenied naming the peer and `rpc`
// for a client calling a worker RPC or a worker calling as another worker.
absl::Status RequireWorker(const PeerIdentity& peer, absl::string_view worker_id,
                           absl::string_view rpc);
// Unauthenticated for a peer without an identity (saying why its credentials were refused, when
// it presented some); PermissionDenied for a worker.
absl::Status RequireClient(const PeerIdentity& peer, absl::string_view rpc);

}  // namespace granary

#endif  // GRANARY_SECURITY_PEER_IDENTITY_H_
