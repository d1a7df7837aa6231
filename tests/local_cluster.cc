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

namespace granary::testing {

std::unique_ptr<grpc::ClientContext> RpcContext() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return context;
}

LocalCluster::LocalCluster(const std::string& dir, const LocalClusterOptions& options) : dir_(dir) {
  if (!Env::Default()->CreateDirs(dir + "/logs").ok()) return;
  const std::string data_roots =
      "--data_roots=" + (options.data_roots.empty() ? dir.substr(0, dir.rfind('/'))
                                                    : absl::StrJoin(options.data_roots, ","));
  dispatcher_.argv = {GRANARY_BINARY,
                      "dispatcher",
                      "--journal_dir=" + dir + "/journal",
                      "--cache_root=" + cache_root(),
                      "--port=0",
                      absl::StrCat("--worker_timeout_ms=", options.worker_timeout_ms),
                      data_roots};
  const auto security_flags = [&options](const std::string& name, const std::string& identity) {
    if (!options.issue_certificate) return std::vector<std::string>{"--insecure"};
    return TransportSecurityFlags(options.issue_certificate(name, identity));
  };
  for (const std::string& flag : security_flags("dispatcher", kDispatcherIdentityUri)) {
    dispatcher_.argv.push_back(flag);
  }
  // The harness's own client (dispatcher()) sees every job's status.
  if (options.issue_certificate) dispatcher_.argv.push_back("--admin_clients=cluster-test");
  dispatcher_.argv.insert(dispatcher_.argv.end(), options.dispatcher_flags.begin(),
                          options.dispatcher_flags.end());
  credentials_ = !options.issue_certificate
                     ? grpc::InsecureChannelCredentials()
                     : ChannelCredentialsFor(options.issue_certificate(
                                                 "cluster-test", ClientIdentityUri("cluster-test")))
                           .value();
  if (!Launch(dispatcher_, dir + "/logs/dispatcher.log")) return;
  dispatcher_address_ = dispatcher_.address;
  // A restart must come back at the same address.
  dispatcher_.argv[4] = "--port=" + dispatcher_address_.substr(dispatcher_address_.rfind(':') + 1);
  dispatcher_stub_ = Dispatcher::NewStub(grpc::CreateChannel(dispatcher_address_, credentials_));
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
  if (dispatcher_.process) {
    dispatcher_.process->Kill(SIGTERM);
    if (dispatcher_.process->WaitFor(std::chrono::seconds(5)) < 0) {
      dispatcher_.process->Kill(SIGKILL);
    }
  }
}

bool LocalCluster::Launch(Process& p, const std::string& log) {
  p.process = std::make_unique<Subprocess>(p.argv, Subprocess::Stderr::kToFile, log);
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

void LocalCluster::StopDispatcher(int signal) {
  dispatcher_.process->Kill(signal);
  dispatcher_.process->Wait();
}

int LocalCluster::WaitDispatcherExit() { return dispatcher_.process->Wait(); }

bool LocalCluster::RestartDispatcher() {
  if (!Launch(dispatcher_, dir_ + "/logs/dispatcher.log")) return false;
  return dispatcher_.address == dispatcher_address_;
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
