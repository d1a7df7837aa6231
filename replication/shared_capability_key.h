// The capability key of a replicated dispatcher (security/capability.h): every replica must
// mint and verify with the same key, so that a capability issued by one leader stays valid
// under the next. It is kept in etcd at <prefix>/capability_key (replication/FORMAT.md),
// created by the first replica to start. Whoever can read that key can forge capabilities:
// the etcd cluster must be reachable only by the dispatchers (SECURITY.md, "Replicated
// dispatcher").
#ifndef GRANARY_REPLICATION_SHARED_CAPABILITY_KEY_H_
#define GRANARY_REPLICATION_SHARED_CAPABILITY_KEY_H_

#include <string>

#include "absl/status/statusor.h"
#include "etcd/etcd_client.h"
#include "security/capability.h"

namespace granary {

// The key under `prefix`, or a new random one stored there if none is. DataLoss naming the key
// if it holds anything but CapabilityKey::kKeyBytes bytes; the client's errors.
absl::StatusOr<CapabilityKey> SharedCapabilityKey(etcd::EtcdClient* client,
                                                  const std::string& prefix);

}  // namespace granary

#endif  // GRANARY_REPLICATION_SHARED_CAPABILITY_KEY_H_
