// Capabilities: the dispatcher's grant to the reader of one task (SECURITY.md). A capability is
// HMAC-SHA256, under a key the dispatcher and its workers share, of (job, task, consumer,
// generation). The dispatcher hands it to the client reading that task (with the task's
// worker, in ClientHeartbeat answers); the worker serves GetElements only against it — so a
// client that can reach a worker still cannot read a task the dispatcher did not give it, and
// a capability dies with its task's generation.
//
// The key lives beside the dispatcher's journal (created once, mode 0600, so restarts keep
// issued capabilities valid) and reaches workers only in the answers to their authenticated
// RegisterWorker and WorkerHeartbeat calls.
#ifndef GRANARY_SECURITY_CAPABILITY_H_
#define GRANARY_SECURITY_CAPABILITY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/env.h"

namespace granary {

// What a capability grants.
struct CapabilityScope {
  int64_t job_id = 0;
  int64_t task_id = 0;
  int32_t consumer = 0;
  int64_t generation = 0;
};

// HMAC-SHA256 of `message` under `key`: what capabilities are, and what derives the keys of
// other MACs from the capability key (security/chunk_mac.h).
std::string HmacSha256(absl::string_view key, absl::string_view message);

class CapabilityKey {
 public:
  static constexpr size_t kKeyBytes = 32;

  // The key in `path`, or a new random one written there (mode 0600) durably (the file and its
  // directory fsynced) if the file does not exist, through `env`. DataLoss naming the file if it
  // holds anything but kKeyBytes bytes.
  static absl::StatusOr<CapabilityKey> LoadOrCreate(const std::string& path,
                                                    Env* env = Env::Default());
  // A new random key (OpenSSL's RAND_bytes).
  static absl::StatusOr<CapabilityKey> Generate();
  // A key from its bytes (as a worker receives it). InvalidArgument unless kKeyBytes long.
  static absl::StatusOr<CapabilityKey> FromBytes(absl::string_view bytes);

  // The capability for `scope`.
  std::string Mint(const CapabilityScope& scope) const;
  // Whether `capability` is this key's for `scope` (compared in constant time).
  bool Verify(const CapabilityScope& scope, absl::string_view capability) const;

  const std::string& bytes() const { return key_; }

 private:
  explicit CapabilityKey(std::string key) : key_(std::move(key)) {}

  std::string key_;
};

}  // namespace granary

#endif  // GRANARY_SECURITY_CAPABILITY_H_
