// The address of a replicated journal, as `granary dispatcher --journal` takes it:
//   etcd://HOST:PORT[,HOST:PORT...]/PREFIX
// — the client URLs of etcd's members, and the key prefix of the journal ("/PREFIX": every key
// of the journal starts with it, replication/FORMAT.md). A DNS name may stand for a host.
#ifndef GRANARY_REPLICATION_ETCD_JOURNAL_URL_H_
#define GRANARY_REPLICATION_ETCD_JOURNAL_URL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace granary {

struct EtcdJournalUrl {
  // "host:port" of each member, in the URL's order.
  std::vector<std::string> endpoints;
  // "/PREFIX", without a trailing '/'.
  std::string prefix;
};

// Whether `url` names an etcd journal (starts with "etcd://").
bool IsEtcdJournalUrl(absl::string_view url);

// InvalidArgument naming the URL and what is wrong: another scheme, no endpoint, an endpoint
// without a port, no prefix.
absl::StatusOr<EtcdJournalUrl> ParseEtcdJournalUrl(absl::string_view url);

}  // namespace granary

#endif  // GRANARY_REPLICATION_ETCD_JOURNAL_URL_H_
