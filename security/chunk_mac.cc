#include "security/chunk_mac.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "glog/logging.h"

namespace granary {
namespace {

constexpr char kKeyLabel[] = "granary cache chunk key v2";
constexpr char kMacLabel[] = "granary cache chunk v2";

// Records up to this size are gathered with the length prefixes into one buffer handed to GMAC
// at kPendingBytes: each update costs ~80 ns, so a chunk of small records (or the 8-byte prefix
// of every record) would otherwise run at a tenth of GMAC's speed.
constexpr size_t kSmallRecordBytes = 4096;
constexpr size_t kPendingBytes = 16384;

void AppendLittleEndian(uint64_t value, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(value >> (8 * i)));
}

// The GMAC algorithm, fetched once.
EVP_MAC* Gmac() {
  static EVP_MAC* const mac = EVP_MAC_fetch(nullptr, "GMAC", nullptr);
  CHECK(mac != nullptr) << "OpenSSL has no GMAC";
  return mac;
}

}  // namespace

ChunkMacKey ChunkMacKey::Derive(const CapabilityKey& capability_key) {
  return ChunkMacKey(HmacSha256(capability_key.bytes(), kKeyLabel));
}

struct ChunkMac::State {
  EVP_MAC_CTX* ctx = nullptr;
  std::string nonce;
  std::string pending;  // bytes of the MAC's input not yet handed to ctx
  ~State() { EVP_MAC_CTX_free(ctx); }
};

ChunkMac::ChunkMac(const ChunkMacKey& key, int64_t task_id, int64_t first_index, std::string nonce)
    : state_(std::make_unique<State>()) {
  CHECK_EQ(nonce.size(), kNonceBytes);
  state_->nonce = std::move(nonce);
  state_->pending.reserve(kPendingBytes + kSmallRecordBytes + 8);
  state_->ctx = EVP_MAC_CTX_new(Gmac());
  CHECK(state_->ctx != nullptr);
  char cipher[] = "AES-256-GCM";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_CIPHER, cipher, 0),
      OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_IV, state_->nonce.data(), kNonceBytes),
      OSSL_PARAM_END};
  CHECK_EQ(key.bytes().size(), 32u);
  CHECK_EQ(EVP_MAC_init(state_->ctx, reinterpret_cast<const unsigned char*>(key.bytes().data()),
                        key.bytes().size(), params),
           1);
  std::string identity = kMacLabel;
  AppendLittleEndian(static_cast<uint64_t>(task_id), &identity);
  AppendLittleEndian(static_cast<uint64_t>(first_index), &identity);
  Add(identity);
}

ChunkMac ChunkMac::ForNewChunk(const ChunkMacKey& key, int64_t task_id, int64_t first_index) {
  std::string nonce(kNonceBytes, '\0');
  CHECK_EQ(RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), kNonceBytes), 1)
      << "OpenSSL's random generator failed";
  return ChunkMac(key, task_id, first_index, std::move(nonce));
}

ChunkMac ChunkMac::ToCheck(const ChunkMacKey& key, int64_t task_id, int64_t first_index,
                           absl::string_view stored) {
  std::string nonce = stored.size() == kMacBytes ? std::string(stored.substr(0, kNonceBytes))
                                                 : std::string(kNonceBytes, '\0');
  return ChunkMac(key, task_id, first_index, std::move(nonce));
}

ChunkMac::~ChunkMac() = default;
ChunkMac::ChunkMac(ChunkMac&&) noexcept = default;
ChunkMac& ChunkMac::operator=(ChunkMac&&) noexcept = default;

void ChunkMac::FlushPending() {
  std::string& pending = state_->pending;
  if (pending.empty()) return;
  CHECK_EQ(EVP_MAC_update(state_->ctx, reinterpret_cast<const unsigned char*>(pending.data()),
                          pending.size()),
           1);
  pending.clear();
}

void ChunkMac::Add(absl::string_view record) {
  std::string& pending = state_->pending;
  AppendLittleEndian(record.size(), &pending);
  if (record.size() <= kSmallRecordBytes) {
    pending.append(record.data(), record.size());
    if (pending.size() >= kPendingBytes) FlushPending();
    return;
  }
  FlushPending();
  CHECK_EQ(EVP_MAC_update(state_->ctx, reinterpret_cast<const unsigned char*>(record.data()),
                          record.size()),
           1);
}

std::string ChunkMac::Finish() {
  FlushPending();
  unsigned char tag[kTagBytes];
  size_t size = 0;
  CHECK_EQ(EVP_MAC_final(state_->ctx, tag, &size, sizeof(tag)), 1);
  CHECK_EQ(size, kTagBytes);
  return state_->nonce + std::string(reinterpret_cast<const char*>(tag), size);
}

bool ChunkMac::Equal(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace granary
