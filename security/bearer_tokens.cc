#include "security/bearer_tokens.h"

#include <openssl/sha.h>

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/env.h"

namespace granary {
namespace {

std::string Digest(absl::string_view token) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

constexpr absl::string_view kBearer = "bearer";

}  // namespace

absl::StatusOr<BearerTokens> BearerTokens::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(Env::Default(), path);
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

absl::StatusOr<BearerTokens> BearerTokens::Parse(absl::string_view text, absl::string_view origin) {
  BearerTokens tokens;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    const auto invalid = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(origin, " line ", number, ": ", why));
    };
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 2) return invalid("expected '<token> <client name>'");
    if (fields[0].size() < kMinTokenBytes) {
      return invalid(absl::StrCat("the token is shorter than ", kMinTokenBytes, " characters"));
    }
    if (absl::StrContains(fields[1], '/')) return invalid("a client name cannot hold '/'");
    if (!tokens.clients_.emplace(Digest(fields[0]), std::string(fields[1])).second) {
      return invalid("the token is given twice");
    }
  }
  return tokens;
}

std::optional<std::string> BearerTokens::ClientFor(absl::string_view token) const {
  const auto it = clients_.find(Digest(token));
  if (it == clients_.end()) return std::nullopt;
  return it->second;
}

PeerIdentity IdentityOfAuthorization(absl::string_view authorization, const BearerTokens* tokens) {
  PeerIdentity none;
  const size_t blank = authorization.find(' ');
  if (blank == absl::string_view::npos ||
      !absl::EqualsIgnoreCase(authorization.substr(0, blank), kBearer)) {
    none.refusal = "the authorization metadata is not 'Bearer <token>'";
    return none;
  }
  if (tokens == nullptr) {
    none.refusal = "the bearer token was refused: this dispatcher takes none (no --tokens_file)";
    return none;
  }
  if (std::optional<std::string> client =
          tokens->ClientFor(absl::StripAsciiWhitespace(authorization.substr(blank)))) {
    return PeerIdentity{PeerIdentity::Role::kClient, *std::move(client)};
  }
  none.refusal = "the bearer token was refused: it is none of the dispatcher's --tokens_file";
  return none;
}

PeerIdentity IdentityOfCall(const grpc::ServerContext& context, const BearerTokens* tokens) {
  PeerIdentity identity = IdentityOf(*context.auth_context());
  if (identity.role != PeerIdentity::Role::kNone) return identity;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return identity;
  return IdentityOfAuthorization(absl::string_view(it->second.data(), it->second.size()), tokens);
}

}  // namespace granary
