// The processes of one `granary chaos` run: a dispatcher, workers (+ standbys) and a client
// (`granary run`), each started from the granary binary on 127.0.0.1 with its stderr in
// <dir>/logs/<name>.log, each killable and restartable with the same identity, flags and address.
// Starting never waits for a worker to serve (it registers with a dispatcher that may itself be
// down, waiting for the harness to restart it): Serving() polls for its announcement. Every
// process still running is SIGKILLed when this object is destroyed. Thread-compatible.
//
// With network namespaces (options.network_namespaces), each process runs in a network namespace
// of its own (netns.h) and serves on its address there instead of 127.0.0.1; its certificate
// names that address.
//
// Replicated (options.replicas > 0): instead of the dispatcher, a local etcd of 3 members
// (etcd/local_etcd_cluster.h, data in <dir>/etcd, logs etcd-<i>.log; not killable by a plan) and
// replicas "replica-<i>" journaling to it (prefix /granary), each reaching each member through
// its own TcpProxy, so that one replica alone can be cut from etcd (CutFromEtcd). Workers and
// the client are given every replica's address.
//
// With proxies (options.proxy_seed; not replicated): a TcpProxy on every link, named as in
// chaos_plan.h — the client's and each worker's --dispatcher is a proxy's address, and each worker
// listens on a port picked here and advertises (--advertise_address) a proxy to it, which the
// dispatcher hands to the client. TLS passes through unchanged (the proxies copy bytes; the
// certificates name 127.0.0.1). The harness's own status and scaling calls bypass the proxies.
#ifndef GRANARY_FAULTINJECT_CHAOS_PROCESSES_H_
#define GRANARY_FAULTINJECT_CHAOS_PROCESSES_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cache/local_redis_server.h"
#include "common/history_log.h"
#include "common/subprocess.h"
#include "common/sync_ledger.h"
#include "faultinject/chaos_plan.h"
#include "faultinject/netns.h"
#include "faultinject/skewed_clock_env.h"
#include "faultinject/tcp_proxy.h"
#include "grpcpp/security/credentials.h"
#include "security/certificate_authority.h"
#include "tools/replica_probe.h"

namespace granary {

struct ChaosProcessesOptions {
  std::string binary;  // The granary binary.
  std::string dir;     // Journal, cache, checkpoints, logs, client outputs.
  // The dispatcher's and workers' --data_roots (where the pipeline's files are).
  std::string data_root;
  // Every connection over TLS with certificates of a throwaway CA in <dir>/tls (the
  // dispatcher's, each worker's naming its id, the client's); false: plain text (--insecure).
  bool tls = true;
  int workers = 2;
  int standby = 0;
  // 0: one dispatcher journaling to <dir>/journal; else this many replicas (above).
  int replicas = 0;
  // The cache tier: <dir>/cache on the filesystem, or (true) a redis-server this object starts
  // on loopback (cache/local_redis_server.h; Unavailable from Start if it does not start).
  bool redis_cache = false;
  // The client's command line after "granary run --dispatcher HOST:PORT".
  std::vector<std::string> client_flags;
  // Several consumers of the job: one client per entry, "client-<i>", its flags client_flags and
  // then these (its --consumer, its digest and position files). Empty: one client, "client".
  std::vector<std::vector<std::string>> consumer_flags;
  // Flags added to every worker's command line.
  std::vector<std::string> extra_worker_flags;
  // GRANARY_FAILPOINTS for the first start of one process ("workers" = every worker); restarts
  // run without.
  std::string failpoint_process;
  std::string failpoints;
  // GRANARY_FAILPOINTS for every start of every worker, restarts included (joined with
  // `failpoints` where those are armed too); empty: none.
  std::string every_worker_failpoints;
  // Every process in a network namespace of its own, serving on its address there
  // (faultinject/netns.h; needs root): the network scenarios' faults (InjectNetworkFault).
  bool network_namespaces = false;
  // Where each process incarnation writes its history (common/FORMAT.md): <name>.<n>.tsv for
  // the n-th start of `name` from 0, and the harness's launches, kills and faults in
  // harness.0.tsv; empty: no history.
  std::string history_dir;
  // The disk scenarios (faultinject/chaos_disks.h): every start of the dispatcher and of each
  // worker follows the disk fault control file <disk_faults_dir>/<name> (GRANARY_DISK_FAULTS);
  // empty: none.
  std::string disk_faults_dir;
  // Power-loss scenarios: every start of the dispatcher and of every worker records its
  // durability events in its own sync ledger, <dir>/ledgers/<name>.<start number>
  // (GRANARY_SYNC_LEDGER), for PowerLoss.
  bool sync_ledgers = false;
  // A TcpProxy on every link (above), the jitter of the i-th link's seeded by proxy_seed + i;
  // nullopt: none, every process dials the others directly.
  std::optional<uint64_t> proxy_seed;
  // The clock scenarios' faults, in every plan process (not etcd), restarts included:
  struct Clocks {
    // It reads its wall clock through libfaketime at the offset in <dir>/clock/<name> (0 until
    // StepWallClock); its steady clock is untouched.
    bool fake_wall = false;
    // The dispatcher's and the workers' Env clock is a SkewedClockEnv over
    // <dir>/clock/<name>.skew (the true rate until SkewEnvClock).
    bool skew_env = false;
  } clocks;
};

// Debian's libfaketime (package faketime), thread-safe build, which the clock scenarios preload.
inline constexpr char kLibfaketimePath[] = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

// The name of the one replica of `probes` (ChaosProcesses::ProbeReplicas) that leads; nullopt if
// none does, or if several answer as leader (a deposed one has not noticed yet).
std::optional<std::string> LeaderOf(const std::map<std::string, ReplicaProbe>& probes);

class ChaosProcesses {
 public:
  explicit ChaosProcesses(const ChaosProcessesOptions& options);
  ~ChaosProcesses();

  // Starts the dispatcher and waits until it serves (replicated: etcd, then the replicas, and
  // waits until one of them leads), then starts the workers and the client. Replicated, the
  // error of LocalEtcdCluster::Plan (naming the etcd binary if it is missing) or Unavailable if
  // etcd is not ready or no replica leads within a minute.
  absl::Status Start();

  // Names of every process: dispatcher (or replica-0…), worker-0…, client (or client-0…).
  std::vector<std::string> names() const;
  // The clients' names: {"client"}, or one "client-<i>" per consumer.
  std::vector<std::string> clients() const;
  // The processes `name` stands for in a plan: every consumer's client for "client", else
  // `name` itself.
  std::vector<std::string> Expand(const std::string& name) const;
  // Whether `name` is a client's ("client", "client-<i>").
  static bool IsClient(const std::string& name);
  bool running(const std::string& name) const;
  // SIGKILLs `name` and reaps it.
  void Kill(const std::string& name);
  // Starts `name` again (same flags and address; no failpoints).
  void Restart(const std::string& name);
  // Whether `name` (a server) announced its address since it was last started. Unavailable if it
  // came back at another address, or has not announced within a minute of its start.
  absl::StatusOr<bool> Serving(const std::string& name);

  // Processes that ended by themselves since the last call, with their exit codes.
  std::map<std::string, int> ReapExited();

  // Checkpoints `worker` wrote since it started (its status RPC); -1 if it does not answer or
  // has not announced its address since it started (Serving), in which case it is not dialed.
  int64_t CheckpointsWritten(const std::string& worker) const;
  // Scales job `job_name` to `num_worker_slots` tasks per consumer (ScaleJob, as the client
  // would). Unavailable while the dispatcher is down or restarting: the caller tries again.
  // REQUIRES: not replicated.
  absl::Status ScaleJob(const std::string& job_name, int32_t num_worker_slots,
                        const std::string& reason) const;

  // Power loss (REQUIRES options.sync_ledgers): SIGKILLs each of `names` that runs, then drops
  // every write each made since its last fsync, as its sync ledgers since its last power loss
  // record them (common/sync_ledger.h's ApplyPowerLoss; torn with `torn_seed` if set). The
  // caller restarts them. Returns what was dropped, or the error of a ledger or a file.
  absl::StatusOr<PowerLossReport> PowerLoss(const std::vector<std::string>& names,
                                            std::optional<uint64_t> torn_seed);

  // Replicated: each replica that runs and announced its address since it last started, as it
  // answers GetStatus now (tools/replica_probe.h), by name.
  std::map<std::string, ReplicaProbe> ProbeReplicas() const;
  // Replicated: closes every connection of `replica` to etcd and refuses its new ones, until
  // HealFromEtcd; its workers and the client still reach it.
  void CutFromEtcd(const std::string& replica);
  void HealFromEtcd(const std::string& replica);

  // The addresses of the workers that serve now (announced since they last started).
  std::vector<std::string> ServingWorkerAddresses() const;
  // The client's credentials (its identity's certificate), for the harness's own calls.
  const std::shared_ptr<grpc::ChannelCredentials>& client_credentials() const {
    return credentials_;
  }
  // With network namespaces: cuts, limits or heals the network (NetworkFault). FailedPrecondition
  // without network namespaces; NetworkNamespaces's errors otherwise.
  absl::Status InjectNetworkFault(const NetworkFault& fault);

  // Appends the harness's own event to the history (common/FORMAT.md); nothing without one.
  void RecordHistory(absl::string_view op, absl::string_view fields);
  // With proxies: applies `fault` to the proxies of its links. InvalidArgument naming a link
  // this run has no proxy on.
  absl::Status InjectProxyFault(const ProxyFault& fault);
  // Clock scenarios (options.clocks.fake_wall): from its next clock reading on, `name` (and its
  // restarts) reads its wall clock `offset_seconds` off the true time (0: the true time again).
  // FailedPrecondition without fake_wall; InvalidArgument for an unknown process.
  absl::Status StepWallClock(const std::string& name, int64_t offset_seconds);
  // Clock scenarios (options.clocks.skew_env): within 100 ms, `name`'s Env clock (a server's)
  // runs as `skew` says (faultinject/skewed_clock_env.h). FailedPrecondition without skew_env;
  // InvalidArgument for an unknown process.
  absl::Status SkewEnvClock(const std::string& name, const ClockSkew& skew);

  // The dispatcher's address (replicated: every replica's, comma-separated).
  const std::string& dispatcher_address() const { return dispatcher_address_; }
  std::string log_path(const std::string& name) const;

 private:
  struct Process {
    std::vector<std::string> argv;
    std::unique_ptr<Subprocess> subprocess;
    bool server = true;
    // Servers: the address announced (kept across restarts), whether this start announced it,
    // and when it started.
    std::string address;
    bool serving = false;
    std::chrono::steady_clock::time_point started;
    // Sync ledgers (options.sync_ledgers): this process's starts so far, and the ledgers of the
    // starts since its last power loss.
    int starts = 0;
    std::vector<std::string> ledgers;
  };
  void Launch(const std::string& name, bool with_failpoints);
  // Launches server `name` (its argv set) and waits until it serves; returns its address.
  absl::StatusOr<std::string> LaunchAndAwait(const std::string& name);
  // Starts the etcd members and waits until they are ready, then a proxy per replica and member.
  absl::Status StartEtcd(CertificateAuthority* ca);
  // With proxies: the proxies of the links to the dispatcher, and those to the workers, each
  // worker's listening port picked (`worker_ports`).
  absl::Status StartProxies(std::map<std::string, int>& worker_ports);
  // Where `from` dials the dispatcher: a proxy's address, or the dispatcher's.
  std::string DispatcherAddressFor(const std::string& from) const;
  // Clock scenarios: the file holding `name`'s wall-clock offset (libfaketime's format).
  std::string clock_path(const std::string& name) const;
  // Clock scenarios: writes `text` to `path` whole (renamed over it), for a clock fault of
  // process `name`; the errors of StepWallClock and SkewEnvClock.
  absl::Status WriteClockControl(const std::string& name, bool enabled, const std::string& path,
                                 const std::string& text);

  const ChaosProcessesOptions options_;
  // With options_.network_namespaces: every process's namespace. Declared first: removed after
  // every process in it is gone.
  std::unique_ptr<NetworkNamespaces> network_;
  // Replicated: the etcd members, and the proxies to them (etcd_proxies_[replica][member]).
  // Declared before processes_: destroyed after the replicas, the proxies before the members.
  std::vector<std::unique_ptr<Subprocess>> etcd_members_;
  std::vector<std::vector<std::unique_ptr<TcpProxy>>> etcd_proxies_;
  // The Redis cache tier, when options_.redis_cache; destroyed after the servers using it.
  std::unique_ptr<LocalRedisServer> redis_;
  std::map<std::string, Process> processes_;
  // With proxies: by link name.
  std::map<std::string, std::unique_ptr<TcpProxy>> proxies_;
  std::string dispatcher_address_;
  // Of the status calls to workers.
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  // The harness's history (null without options_.history_dir), and how often each process was
  // started (its next incarnation).
  std::unique_ptr<HistoryLog> history_;
  std::map<std::string, int> incarnations_;
};

}  // namespace granary

#endif  // GRANARY_FAULTINJECT_CHAOS_PROCESSES_H_
