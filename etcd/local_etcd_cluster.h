// LocalEtcdCluster: the plan of a local etcd cluster (Debian's etcd-server, /usr/bin/etcd) of 1
// or 3 members on 127.0.0.1 — each member's name, client and peer port, data directory and
// command line — and the readiness check of its members. `granary cluster --replicas N` runs
// it for the replicated dispatcher's journal (its supervisor starts, restarts and stops the
// members by pid); testing/etcd_test_cluster.h runs it for tests. Whoever starts a member owns
// its process; this class starts none.
//
// Ports: a directory planned before (its file "members", FORMAT.md) keeps its ports — a member
// restarted on its data directory must come back at the peer address the others know —
// otherwise free loopback ports are picked and the file is written.
// Raft timeouts are short (a killed leader is replaced within about half a second).
// Thread-compatible.
#ifndef GRANARY_ETCD_LOCAL_ETCD_CLUSTER_H_
#define GRANARY_ETCD_LOCAL_ETCD_CLUSTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "etcd/etcd_client.h"
#include "security/transport_security.h"

namespace granary::etcd {

inline constexpr char kEtcdBinary[] = "/usr/bin/etcd";

struct LocalEtcdOptions {
  // Where the members' data directories (member-<i>.etcd) and the file "members" live.
  std::string dir;
  // 1 or 3.
  int members = 3;
  // etcd's --heartbeat-interval and --election-timeout (milliseconds): etcd's defaults are 100
  // and 1000; these make a leader's death noticed within about half a second.
  int heartbeat_ms = 50;
  int election_ms = 400;
  // etcd's --max-request-bytes and --quota-backend-bytes; 0: etcd's defaults (1.5 MiB, 2 GiB).
  int64_t max_request_bytes = 0;
  int64_t quota_backend_bytes = 0;
  // The members' client connections: TLS (https client URLs, clients authenticated by
  // certificates of security.ca_file; each member serves security's certificate) or plain text.
  // Peer connections between the members (loopback only) are plain text.
  TransportSecurity security{.insecure = true};
};

struct LocalEtcdMember {
  std::string name;  // "member-<i>"
  int client_port = 0;
  int peer_port = 0;
  std::string data_dir;
  // "127.0.0.1:<client_port>".
  std::string endpoint() const;
};

class LocalEtcdCluster {
 public:
  // Plans the cluster in options.dir (created if missing), reusing or picking ports as the file
  // comment says. FailedPrecondition saying to run scripts/setup_deps.sh when /usr/bin/etcd is
  // missing; InvalidArgument for a member count other than 1 or 3, or a "members" file that is
  // not for options.members members (naming the file and the line); Unavailable when no free
  // port is found or the file cannot be written.
  static absl::StatusOr<LocalEtcdCluster> Plan(const LocalEtcdOptions& options);

  const std::vector<LocalEtcdMember>& members() const { return members_; }
  int size() const { return static_cast<int>(members_.size()); }
  // Every member's endpoint, in member order.
  std::vector<std::string> endpoints() const;
  // Options for an EtcdClient of this cluster (every endpoint; the members' security: with TLS
  // the client presents the members' certificate, which is valid as a client's too).
  EtcdClientOptions ClientOptions() const;
  // The command line of member `member` (logging to stderr).
  std::vector<std::string> Argv(int member) const;

  // Waits until member `member` answers Status (through `client`, a client of this cluster)
  // with a leader known. If `process` (the member's) is given, its exit ends the wait with
  // Unavailable naming how it exited. Unavailable naming the member and the last answer when
  // `deadline` passes first.
  absl::Status AwaitMember(EtcdClient& client, int member, absl::Time deadline,
                           Subprocess* process = nullptr) const;
  // AwaitMember for every member, then a Range through the cluster.
  absl::Status AwaitReady(EtcdClient& client, absl::Time deadline) const;

 private:
  LocalEtcdCluster(const LocalEtcdOptions& options, std::vector<LocalEtcdMember> members);

  LocalEtcdOptions options_;
  std::vector<LocalEtcdMember> members_;
};

}  // namespace granary::etcd

#endif  // GRANARY_ETCD_LOCAL_ETCD_CLUSTER_H_
