#include "replication/shared_capability_key.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace granary {

absl::StatusOr<CapabilityKey> SharedCapabilityKey(etcd::EtcdClient* client,
                                                  const std::string& prefix) {
  const std::string key = prefix + "/capability_key";
  ASSIGN_OR_RETURN(const CapabilityKey fresh, CapabilityKey::Generate());
  // Created if absent; else the existing one is read back in the same transaction.
  etcdserverpb::TxnRequest create;
  *create.add_compare() = etcd::txn::CreateRevision(key, etcdserverpb::Compare::EQUAL, 0);
  *create.add_success() = etcd::txn::PutOp(key, fresh.bytes());
  *create.add_failure() = etcd::txn::RangeOp(key);
  ASSIGN_OR_RETURN(const etcdserverpb::TxnResponse created, client->Txn(create));
  if (created.succeeded()) return fresh;
  const auto& kvs = created.responses(0).response_range().kvs();
  const std::string stored = kvs.empty() ? std::string() : kvs[0].value();
  absl::StatusOr<CapabilityKey> existing = CapabilityKey::FromBytes(stored);
  if (!existing.ok()) {
    return absl::DataLossError(absl::StrCat("etcd key ", key, " holds ", stored.size(),
                                            " bytes, not a capability key of ",
                                            CapabilityKey::kKeyBytes));
  }
  return existing;
}

}  // namespace granary
