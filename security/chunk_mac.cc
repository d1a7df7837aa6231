#include "security/chunk_mac.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "glog/logging.h"

namespace granary {
namespace {

constexpr char kKeyLabel[] = "granary cache chunk key v1";
constexpr char kMacLabel[] = "granary cache chunk v1";

void AppendLittleEndian(uint64_t value, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}

// The HMAC algorithm, fetched once.
EVP_MAC* Hmac() {
  static EVP_MAC* const mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  CHECK(mac != nullptr) << "OpenSSL has no HMAC";
  return mac;
}

}  // namespace

ChunkMacKey ChunkMacKey::Derive(const CapabilityKey& capability_key) {
  return ChunkMacKey(HmacSha256(capability_key.bytes(), kKeyLabel));
}

struct ChunkMac::State {
  EVP_MAC_CTX* ctx = nullptr;
  ~State() { EVP_MAC_CTX_free(ctx); }
};

ChunkMac::ChunkMac(const ChunkMacKey& key, int64_t task_id, int64_t first_index)
    : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MAC_CTX_new(Hmac());
  CHECK(state_->ctx != nullptr);
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_END};
  CHECK_EQ(EVP_MAC_init(state_->ctx, reinterpret_cast<const unsigned char*>(key.bytes().data()),
                        key.bytes().size(), params),
           1);
  std::string identity = kMacLabel;
  AppendLittleEndian(static_cast<uint64_t>(task_id), &identity);
  AppendLittleEndian(static_cast<uint64_t>(first_index), &identity);
  Add(identity);
}

ChunkMac::~ChunkMac() = default;

void ChunkMac::Add(absl::string_view record) {
  std::string length;
  AppendLittleEndian(record.size(), &length);
  EVP_MAC_update(state_->ctx, reinterpret_cast<const unsigned char*>(length.data()), length.size());
  EVP_MAC_update(state_->ctx, reinterpret_cast<const unsigned char*>(record.data()), record.size());
}

std::string ChunkMac::Finish() {
  unsigned char mac[EVP_MAX_MD_SIZE];
  size_t size = 0;
  CHECK_EQ(EVP_MAC_final(state_->ctx, mac, &size, sizeof(mac)), 1);
  return std::string(reinterpret_cast<const char*>(mac), size);
}

bool ChunkMac::Equal(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace granary
