#include "security/capability.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/status_macros.h"

namespace granary {
namespace {

// The scope as fixed-width little-endian fields, so that no two scopes share a message.
std::string Message(const CapabilityScope& scope) {
  std::string message;
  const auto put = [&message](uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) message.push_back(static_cast<char>(value >> (8 * i)));
  };
  message = "granary capability v1";
  put(static_cast<uint64_t>(scope.job_id), 8);
  put(static_cast<uint64_t>(scope.task_id), 8);
  put(static_cast<uint32_t>(scope.consumer), 4);
  put(static_cast<uint64_t>(scope.generation), 8);
  return message;
}

}  // namespace

absl::StatusOr<CapabilityKey> CapabilityKey::LoadOrCreate(const std::string& path, Env* env) {
  if (env->FileExists(path)) {
    ASSIGN_OR_RETURN(std::string key, ReadFileToString(env, path));
    if (key.size() != kKeyBytes) {
      return absl::DataLossError(
          absl::StrCat("capability key ", path, " holds ", key.size(), " bytes, not ", kKeyBytes));
    }
    return CapabilityKey(std::move(key));
  }
  ASSIGN_OR_RETURN(CapabilityKey generated, Generate());
  std::string key = generated.key_;
  const std::string temporary = path + ".tmp";
  RETURN_IF_ERROR(WriteStringToFile(env, temporary, key, /*sync=*/true));
  if (::chmod(temporary.c_str(), 0600) != 0) {
    return absl::InternalError(absl::StrCat("chmod ", temporary));
  }
  RETURN_IF_ERROR(env->RenameFile(temporary, path));
  // Without this, a power loss could undo the rename: a new key at the next start would reject
  // every capability the old one minted.
  const size_t slash = path.rfind('/');
  RETURN_IF_ERROR(env->SyncDir(slash == std::string::npos ? "." : path.substr(0, slash)));
  return CapabilityKey(std::move(key));
}

absl::StatusOr<CapabilityKey> CapabilityKey::Generate() {
  std::string key(kKeyBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), kKeyBytes) != 1) {
    return absl::InternalError("OpenSSL RAND_bytes failed");
  }
  return CapabilityKey(std::move(key));
}

absl::StatusOr<CapabilityKey> CapabilityKey::FromBytes(absl::string_view bytes) {
  if (bytes.size() != kKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a capability key has ", kKeyBytes, " bytes, not ", bytes.size()));
  }
  return CapabilityKey(std::string(bytes));
}

std::string HmacSha256(absl::string_view key, absl::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &size);
  return std::string(reinterpret_cast<const char*>(mac), size);
}

std::string CapabilityKey::Mint(const CapabilityScope& scope) const {
  return HmacSha256(key_, Message(scope));
}

bool CapabilityKey::Verify(const CapabilityScope& scope, absl::string_view capability) const {
  const std::string expected = Mint(scope);
  return capability.size() == expected.size() &&
         CRYPTO_memcmp(expected.data(), capability.data(), expected.size()) == 0;
}

}  // namespace granary
