// LocalCluster: a real dispatcher and workers as processes on 127.0.0.1 for multi-process
// tests, with each worker killable and restartable (same id, same address). Everything is
// stopped (and reaped) when the cluster is destroyed.
#ifndef GRANARY_TESTS_LOCAL_CLUSTER_H_
#define GRANARY_TESTS_LOCAL_CLUSTER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "proto/dispatcher.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "security/transport_security.h"

namespace granary::testing {

struct LocalClusterOptions {
  int workers = 1;
  int standby = 0;
  std::vector<std::string> worker_flags;
  std::vector<std::string> dispatcher_flags;
  // The dispatcher's and workers' --data_roots; empty: the directory the cluster's directory is
  // in (a test's scratch directory, where its data is).
  std::vector<std::string> data_roots;
  // TLS: the dispatcher, each worker (its certificate naming its id) and the cluster's own
  // stubs (a client 'cluster-test', an --admin_clients of the dispatcher unless
  // dispatcher_flags say otherwise) get certificates issued by this (name, identity URI ->
  // files); null: plain text (--insecure).
  std::function<TransportSecurity(const std::string& name, const std::string& identity_uri)>
      issue_certificate;
  int64_t worker_timeout_ms = 2000;
  // A replicated dispatcher (issue 32): `replicas` dispatcher processes (ids replica-0, ...)
  // over this journal (--journal etcd://HOST:PORT[,...]/PREFIX); empty: one dispatcher over a
  // RocksDB journal in the cluster's directory.
  std::string etcd_journal;
  int replicas = 1;
  // Where the servers run: a network namespace (its path, /run/netns/…; faultinject/netns.h)
  // and their --host, an address of it (which issue_certificate's certificates must name).
  // Empty: this process's namespace, on 127.0.0.1.
  std::string network_namespace;
  std::string host;
};

class LocalCluster {
 public:
  // Starts the processes under `dir` (journal, cache, logs). Check ok() before use.
  LocalCluster(const std::string& dir, const LocalClusterOptions& options);
  ~LocalCluster();

  bool ok() const { return ok_; }
  // The dispatcher's address; replicated, every replica's, separated by commas (what workers
  // and clients are given).
  const std::string& dispatcher_address() const { return dispatcher_address_; }
  // The dispatcher's --cache_root.
  std::string cache_root() const { return dir_ + "/cache"; }
  const std::string& worker_address(int i) const { return workers_[i].address; }
  std::string worker_id(int i) const { return "worker-" + std::to_string(i); }
  // A stub of the (first replica's) dispatcher.
  Dispatcher::Stub& dispatcher() { return *dispatcher_stub_; }
  pid_t dispatcher_pid(int replica = 0) const { return dispatchers_[replica].process->pid(); }
  const std::string& replica_address(int replica) const { return dispatchers_[replica].address; }
  // The HTTP ports of a dispatcher (replica `replica`) or worker started with --metrics_port (in
  // dispatcher_flags or worker_flags; 0 picks a free one, read from the process' second stdout
  // line); 0 without.
  int dispatcher_metrics_port(int replica = 0) const { return dispatchers_[replica].metrics_port; }
  int worker_metrics_port(int i) const { return workers_[i].metrics_port; }
  pid_t worker_pid(int i) const { return workers_[i].process->pid(); }
  std::unique_ptr<Worker::Stub> WorkerStub(int i) const;

  // Sends `signal` to the dispatcher (replica `replica`) and reaps it.
  void StopDispatcher(int signal, int replica = 0);
  // Waits for the dispatcher to exit by itself (a failpoint's crash); its exit code.
  int WaitDispatcherExit();
  // Starts the dispatcher (replica `replica`) again on the same journal and address; false if
  // it did not come up.
  bool RestartDispatcher(int replica = 0);
  // Whether the dispatcher (replica `replica`) is running (not exited or killed), reaping it
  // if it exited.
  bool DispatcherRunning(int replica = 0);
  // The replica that answers GetStatus (the leader), once one does within `timeout`; else -1.
  int LeaderReplica(absl::Duration timeout) const;

  // SIGKILLs worker i and reaps it.
  void KillWorker(int i);
  // Starts worker i again with the same id and address; false if it did not come up.
  bool RestartWorker(int i);

 private:
  struct Process {
    std::vector<std::string> argv;
    std::unique_ptr<Subprocess> process;
    std::string address;
    int metrics_port = 0;
  };
  bool Launch(Process& p, const std::string& log);
  std::string DispatcherLog(int replica) const;

  const std::string dir_;
  const std::string network_namespace_;
  bool ok_ = false;
  // One; or, replicated, each replica.
  std::vector<Process> dispatchers_;
  std::string dispatcher_address_;
  std::unique_ptr<Dispatcher::Stub> dispatcher_stub_;
  std::vector<Process> workers_;
  // Of the cluster's own stubs.
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
};

// A ClientContext with a 10 s deadline.
std::unique_ptr<grpc::ClientContext> RpcContext();

}  // namespace granary::testing

#endif  // GRANARY_TESTS_LOCAL_CLUSTER_H_
