// Chunk MACs: what makes a cache chunk unforgeable (SECURITY.md, cache/FORMAT.md "Chunk
// MAC"). A chunk's MAC is AES-256-GMAC, under a key derived from the capability key the
// dispatcher and its workers share (security/capability.h) and a random nonce drawn for the
// chunk, of the chunk's identity (the task that wrote it and its first index) and its records in
// order; the MAC is the nonce followed by the tag. The worker writing the chunk computes it; the
// manifest (the dispatcher's journaled state) keeps it; the worker reading the chunk checks the
// file against it before serving a byte — so neither a damaged chunk nor one written by anyone
// without the key (a tenant with write access to the shared cache directory) is ever served.
//
// GMAC runs at memory speed with AES-NI and carry-less multiplication (bench/chunk_mac_bench:
// ~4× HMAC-SHA256, this construction's predecessor); SECURITY.md explains the choice.
#ifndef GRANARY_SECURITY_CHUNK_MAC_H_
#define GRANARY_SECURITY_CHUNK_MAC_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "security/capability.h"

namespace granary {

class ChunkMacKey {
 public:
  // A key known to everyone (all zero bytes): MACs under it detect damage, not forgery. For
  // caches written and read without a dispatcher's key (tests, tools).
  ChunkMacKey() : key_(32, '\0') {}
  // The chunk key of `capability_key`: HMAC-SHA256(capability key, a fixed label), so the
  // capability key itself never keys anything else.
  static ChunkMacKey Derive(const CapabilityKey& capability_key);

  const std::string& bytes() const { return key_; }

 private:
  explicit ChunkMacKey(std::string key) : key_(std::move(key)) {}
  std::string key_;
};

// The MAC of one chunk, fed record by record. Thread-compatible; movable.
class ChunkMac {
 public:
  static constexpr size_t kNonceBytes = 12;
  static constexpr size_t kTagBytes = 16;
  static constexpr size_t kMacBytes = kNonceBytes + kTagBytes;

  // The MAC of a chunk being written, under a nonce drawn now from OpenSSL's CSPRNG (96 random
  // bits: no two chunks under one key share a nonce while fewer than ~2^32 are written).
  static ChunkMac ForNewChunk(const ChunkMacKey& key, int64_t task_id, int64_t first_index);
  // The MAC to recompute for checking `stored`, a MAC Finish() returned for this chunk: under
  // the nonce `stored` begins with. A `stored` of any other size than kMacBytes (damaged, or
  // written by a Granary of an older chunk format) never equals what Finish() returns.
  static ChunkMac ToCheck(const ChunkMacKey& key, int64_t task_id, int64_t first_index,
                          absl::string_view stored);

  ~ChunkMac();
  ChunkMac(ChunkMac&&) noexcept;
  ChunkMac& operator=(ChunkMac&&) noexcept;

  // Adds the chunk's next record (length-prefixed, so no two record sequences share a MAC).
  void Add(absl::string_view record);
  // The MAC (kMacBytes: the nonce, then the tag) of the identity and the records added. Ends
  // this ChunkMac.
  std::string Finish();

  // Whether two MACs are equal (compared in constant time).
  static bool Equal(absl::string_view a, absl::string_view b);

 private:
  struct State;
  ChunkMac(const ChunkMacKey& key, int64_t task_id, int64_t first_index, std::string nonce);
  // Hands the buffered length prefixes and small records to GMAC.
  void FlushPending();

  std::unique_ptr<State> state_;
};

}  // namespace granary

#endif  // GRANARY_SECURITY_CHUNK_MAC_H_
