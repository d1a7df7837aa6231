#include "tests/local_cluster.h"

#include <signal.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/env.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "security/peer_identity.h"
#include "tools/replica_probe.h"

namespace granary::testing {

std::unique_ptr<grpc::ClientContext> RpcContext() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return context;
}

LocalCluster::LocalCluster(const std::string& dir, const LocalClusterOptions& options)
    : dir_(dir), network_namespace_(options.network_namespace) {
  if (!Env::Default()->CreateDirs(dir + "/logs").ok()) return;
  const std::string data_roots =
      "--data_roots=" + (options.data_roots.empty() ? dir.substr(0, dir.rfind('/'))
                                                    : absl::StrJoin(options.data_roots, ","));
  Process& first = dispatchers_.emplace_back();
  first.argv = {GRANARY_BINARY,
                "dispatcher",
                options.etcd_journal.empty() ? "--journal_dir=" + dir + "/journal"
                                             : "--journal=" + options.etcd_journal,
                "--cache_root=" + cache_root(),
                "--port=0",
                absl::StrCat("--worker_timeout_ms=", options.worker_timeout_ms),
                data_roots};
  const auto security_flags = [&options](const std::string& name, const std::string& identity) {
    if (!options.issue_certificate) return std::vector<std::string>{"--insecure"};
    return TransportSecurityFlags(options.issue_certificate(name, identity));
  };
  for (const std::string& flag : security_flags("dispatcher", kDispatcherIdentityUri)) {
    first.argv.push_back(flag);
  }
  if (!options.host.empty()) first.argv.push_back("--host=" + options.host);
  // The harness's own client (dispatcher()) sees every job's status.
  if (options.issue_certificate) first.argv.push_back("--admin_clients=cluster-test");
  first.argv.insert(first.argv.end(), options.dispatcher_flags.begin(),
                    options.dispatcher_flags.end());
  // Replicas: the same flags, each with its own id.
  const std::vector<std::string> argv = first.argv;  // `first` moves as the vector grows
  for (int i = 1; i < options.replicas; ++i) dispatchers_.push_back(Process{argv});
  if (!options.etcd_journal.empty()) {
    for (int i = 0; i < options.replicas; ++i) {
      dispatchers_[i].argv.push_back(absl::StrCat("--replica_id=replica-", i));
    }
  }
  credentials_ = !options.issue_certificate
                     ? grpc::InsecureChannelCredentials()
                     : ChannelCredentialsFor(options.issue_certificate(
                                                 "cluster-test", ClientIdentityUri("cluster-test")))
                           .value();
  std::vector<std::string> addresses;
  for (int i = 0; i < static_cast<int>(dispatchers_.size()); ++i) {
    Process& d = dispatchers_[i];
    if (!Launch(d, DispatcherLog(i))) return;
    addresses.push_back(d.address);
    // A restart must come back at the same address.
    d.argv[4] = "--port=" + d.address.substr(d.address.rfind(':') + 1);
  }
  dispatcher_address_ = absl::StrJoin(addresses, ",");
  dispatcher_stub_ = Dispatcher::NewStub(grpc::CreateChannel(addresses[0], credentials_));
  for (int i = 0; i < options.workers + options.standby; ++i) {
    Process& w = workers_.emplace_back();
    w.argv = {GRANARY_BINARY,
              "worker",
              "--dispatcher=" + dispatcher_address_,
              "--worker_id=" + worker_id(i),
              "--port=0",
              data_roots};
    for (const std::string& flag : security_flags(worker_id(i), WorkerIdentityUri(worker_id(i)))) {
      w.argv.push_back(flag);
    }
    if (!options.host.empty()) w.argv.push_back("--host=" + options.host);
    if (i >= options.workers) w.argv.push_back("--standby");
    w.argv.insert(w.argv.end(), options.worker_flags.begin(), options.worker_flags.end());
    if (!Launch(w, absl::StrCat(dir, "/logs/", worker_id(i), ".log"))) return;
    // A restart must come back at the same address.
    w.argv[4] = "--port=" + w.address.substr(w.address.rfind(':') + 1);
  }
  ok_ = true;
}

LocalCluster::~LocalCluster() {
  for (Process& w : workers_) {
    if (w.process) w.process->Kill(SIGTERM);
  }
  for (Process& w : workers_) {
    if (w.process && w.process->WaitFor(std::chrono::seconds(5)) < 0) w.process->Kill(SIGKILL);
  }
  for (Process& d : dispatchers_) {
    if (d.process) d.process->Kill(SIGTERM);
  }
  for (Process& d : dispatchers_) {
    if (d.process && d.process->WaitFor(std::chrono::seconds(5)) < 0) d.process->Kill(SIGKILL);
  }
}

bool LocalCluster::Launch(Process& p, const std::string& log) {
  p.process = std::make_unique<Subprocess>(p.argv, Subprocess::Stderr::kToFile, log,
                                           std::vector<std::string>{}, network_namespace_);
  p.address = p.process->ReadListenAddress();
  if (p.address.empty()) return false;
  p.metrics_port = 0;
  for (const std::string& arg : p.argv) {
    if (!absl::StartsWith(arg, "--metrics_port")) continue;
    // The second line: "granary <component> metrics on http[s]://<host>:<port>".
    const std::string line = p.process->ReadLine();
    const size_t colon = line.rfind(':');
    if (line.find(" metrics on http") == std::string::npos || colon == std::string::npos ||
        !absl::SimpleAtoi(line.substr(colon + 1), &p.metrics_port)) {
      return false;
    }
  }
  return true;
}

std::unique_ptr<Worker::Stub> LocalCluster::WorkerStub(int i) const {
  return Worker::NewStub(grpc::CreateChannel(workers_[i].address, credentials_));
}

std::string LocalCluster::DispatcherLog(int replica) const {
  return dispatchers_.size() == 1 ? dir_ + "/logs/dispatcher.log"
                                  : absl::StrCat(dir_, "/logs/dispatcher-", replica, ".log");
}

void LocalCluster::StopDispatcher(int signal, int replica) {
  dispatchers_[replica].process->Kill(signal);
  dispatchers_[replica].process->Wait();
}

int LocalCluster::WaitDispatcherExit() { return dispatchers_[0].process->Wait(); }

bool LocalCluster::RestartDispatcher(int replica) {
  Process& d = dispatchers_[replica];
  const std::string address = d.address;
  if (!Launch(d, DispatcherLog(replica))) return false;
  return d.address == address;
}

bool LocalCluster::DispatcherRunning(int replica) {
  Subprocess& process = *dispatchers_[replica].process;
  return process.running() && process.WaitFor(std::chrono::milliseconds(0)) == -1;
}

int LocalCluster::LeaderReplica(absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  do {
    std::vector<int> running;
    std::vector<std::string> addresses;
    for (int i = 0; i < static_cast<int>(dispatchers_.size()); ++i) {
      if (dispatchers_[i].process == nullptr || !dispatchers_[i].process->running()) continue;
      running.push_back(i);
      addresses.push_back(dispatchers_[i].address);
    }
    const std::vector<ReplicaProbe> probes =
        ProbeReplicas(addresses, credentials_, absl::Seconds(1));
    for (size_t i = 0; i < probes.size(); ++i) {
      if (probes[i].role == ReplicaProbe::Role::kLeader) return running[i];
    }
    absl::SleepFor(absl::Milliseconds(20));
  } while (absl::Now() < deadline);
  return -1;
}

void LocalCluster::KillWorker(int i) {
  workers_[i].process->Kill(SIGKILL);
  workers_[i].process->Wait();
}

bool LocalCluster::RestartWorker(int i) {
  const std::string address = workers_[i].address;
  if (!Launch(workers_[i], absl::StrCat(dir_, "/logs/", worker_id(i), ".log"))) return false;
  return workers_[i].address == address;
}

}  // namespace granary::testing
