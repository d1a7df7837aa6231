// BearerTokens: the clients the dispatcher knows by token (`--tokens_file`, SECURITY.md) — the
// other common way, besides client certificates, that ML clusters authenticate jobs. A client
// sends its token as gRPC call credentials ("authorization: Bearer <token>", only over TLS);
// the dispatcher maps it to the client's name, which then owns the jobs it creates.
//
// Tokens are kept only as SHA-256 digests and looked up by digest, so a lookup's timing says
// nothing about how much of a guess matched.
#ifndef GRANARY_SECURITY_BEARER_TOKENS_H_
#define GRANARY_SECURITY_BEARER_TOKENS_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"
#include "security/peer_identity.h"

namespace granary {

class BearerTokens {
 public:
  // The shortest token accepted.
  static constexpr size_t kMinTokenBytes = 16;

  // Reads `path`: one "<token> <client name>" per line, separated by blanks; empty lines and
  // lines starting with '#' are skipped. InvalidArgument naming the file and line for a line
  // without exactly two fields, a token shorter than kMinTokenBytes, a token given twice, or a
  // name that is empty or holds '/'; the read's error for a file that cannot be read.
  static absl::StatusOr<BearerTokens> Load(const std::string& path);
  // The same from the file's text; `origin` names it in errors.
  static absl::StatusOr<BearerTokens> Parse(absl::string_view text, absl::string_view origin);

  // The client `token` names, if any.
  std::optional<std::string> ClientFor(absl::string_view token) const;
  size_t size() const { return clients_.size(); }

 private:
  // SHA-256 of a token -> client name.
  std::map<std::string, std::string> clients_;
};

// The identity the value of a call's "authorization" metadata proves with `tokens` (null: the
// dispatcher takes no tokens): a client for "Bearer <token>" with a known token — the scheme in
// any case ("bearer", "BEARER"; RFC 6750, after RFC 7235). Otherwise role kNone with a refusal
// saying why (an unknown token, another scheme, no tokens taken) that never quotes the token.
PeerIdentity IdentityOfAuthorization(absl::string_view authorization, const BearerTokens* tokens);

// The identity a call proves: its certificate's (IdentityOf), else that of its "authorization"
// metadata (IdentityOfAuthorization). Role kNone when neither names anyone; its refusal says
// why when the call presented an authorization that proved no one.
PeerIdentity IdentityOfCall(const grpc::ServerContext& context, const BearerTokens* tokens);

}  // namespace granary

#endif  // GRANARY_SECURITY_BEARER_TOKENS_H_
