// EtcdTestCluster: a real etcd cluster (Debian's etcd-server, /usr/bin/etcd) of 1 or 3 members
// on 127.0.0.1 for tests of the etcd client and the replicated dispatcher's journal, as
// etcd/local_etcd_cluster.h plans it (free client and peer ports, short raft timeouts so that a
// killed leader is replaced quickly) in a fresh temporary directory, each member logging to
// member-<i>.log there.
// With Options::security TLS, the members serve https client URLs and accept only clients with a
// certificate of security.ca_file (etcd's --client-cert-auth); peers stay plain text on loopback.
// Members can be killed (SIGKILL), restarted on their data, and paused (SIGSTOP, as a member cut
// off from the others looks to them) and resumed. The destructor SIGKILLs and reaps every member
// it started, by pid, so a failing test leaves no etcd behind (Subprocess also has the kernel
// kill a member whose starting thread dies). Thread-compatible.
#ifndef GRANARY_TESTING_ETCD_TEST_CLUSTER_H_
#define GRANARY_TESTING_ETCD_TEST_CLUSTER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "etcd/etcd_client.h"
#include "etcd/local_etcd_cluster.h"
#include "testing/scoped_temp_dir.h"

namespace granary::testing {

class EtcdTestCluster {
 public:
  // The local cluster's settings (etcd/local_etcd_cluster.h) — but 1 member by default, and
  // `dir` is not used: the cluster lives in a fresh temporary directory of its own. With
  // security TLS, each member's certificate must be valid for 127.0.0.1
  // (security/certificate_authority.h issues such certificates).
  struct Options : etcd::LocalEtcdOptions {
    Options() { members = 1; }
    // How long Start and RestartMember wait for the cluster (or member) to answer.
    absl::Duration start_timeout = absl::Seconds(20);
  };

  // Starts the members and waits until each answers Status with a leader known and a Range
  // through the cluster succeeds. FailedPrecondition saying to run scripts/setup_deps.sh when
  // /usr/bin/etcd is missing; InvalidArgument for a bad member count; Unavailable (with the
  // end of the members' logs) when the cluster does not come up within start_timeout.
  static absl::StatusOr<std::unique_ptr<EtcdTestCluster>> Start(const Options& options);
  ~EtcdTestCluster();
  EtcdTestCluster(const EtcdTestCluster&) = delete;
  EtcdTestCluster& operator=(const EtcdTestCluster&) = delete;

  int size() const { return static_cast<int>(members_.size()); }
  // "127.0.0.1:PORT" of every member's client URL, in member order.
  std::vector<std::string> endpoints() const;
  std::string endpoint(int member) const;
  // Options for an EtcdClient of this cluster (every endpoint; with TLS the client presents the
  // members' certificate, which is valid as a client's too).
  etcd::EtcdClientOptions ClientOptions() const;
  // The pid of member `member` (-1 when killed).
  pid_t pid(int member) const;
  // The index of the member that is the raft leader now (asking the running, unpaused
  // members); NotFound when no such member is the leader a member names.
  absl::StatusOr<int> LeaderIndex();

  // SIGKILLs member `member` and reaps it (a no-op when it is not running).
  void KillMember(int member);
  // Kills member `member` if running and starts it again on its data directory and ports;
  // waits until it answers Status with a leader known. Unavailable (with its log) if it does
  // not within start_timeout.
  absl::Status RestartMember(int member);
  // SIGSTOP / SIGCONT member `member`: paused, it neither answers nor heartbeats. StopMember
  // returns once every thread of the member has stopped.
  void StopMember(int member);
  void ContinueMember(int member);

  // The last `lines` lines of member `member`'s log.
  std::string LogTail(int member, int lines = 20) const;

 private:
  struct Member {
    std::string log_path;
    std::unique_ptr<Subprocess> process;
    bool paused = false;
  };

  EtcdTestCluster(const Options& options, std::unique_ptr<ScopedTempDir> dir,
                  etcd::LocalEtcdCluster plan);
  // Starts member `member`'s etcd process.
  void Launch(int member);
  // Waits until member `member` answers Status with a leader known (its log's end in the
  // error).
  absl::Status AwaitMember(int member, absl::Time deadline);

  const Options options_;
  const std::unique_ptr<ScopedTempDir> dir_;
  const etcd::LocalEtcdCluster plan_;
  std::vector<Member> members_;
  std::unique_ptr<etcd::EtcdClient> client_;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTING_ETCD_TEST_CLUSTER_H_
