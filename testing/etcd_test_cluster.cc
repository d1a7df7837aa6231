#include "testing/etcd_test_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "testing/loopback_port.h"

namespace granary::testing {
namespace {

constexpr char kEtcdBinary[] = "/usr/bin/etcd";
constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

std::string Url(int port) { return absl::StrCat("http://127.0.0.1:", port); }

// A free loopback port not in `taken` (a member's two ports are chosen before either is bound).
int FreePortOtherThan(const std::vector<int>& taken) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = BindLoopbackPort(0);
    if (port != 0 && std::find(taken.begin(), taken.end(), port) == taken.end()) return port;
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdTestCluster>> EtcdTestCluster::Start(const Options& options) {
  if (access(kEtcdBinary, X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(kEtcdBinary, " is missing (Debian's etcd-server): run scripts/setup_deps.sh"));
  }
  if (options.members != 1 && options.members != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd test cluster: members must be 1 or 3, is ", options.members));
  }
  std::unique_ptr<EtcdTestCluster> cluster(new EtcdTestCluster(options));
  for (int i = 0; i < cluster->size(); ++i) cluster->Launch(i);
  const absl::Time deadline = absl::Now() + options.start_timeout;
  for (int i = 0; i < cluster->size(); ++i) RETURN_IF_ERROR(cluster->AwaitMember(i, deadline));
  RETURN_IF_ERROR(cluster->client_->Range("granary-test-cluster-ready").status());
  return cluster;
}

EtcdTestCluster::EtcdTestCluster(const Options& options) : options_(options) {
  std::vector<int> taken;
  std::vector<std::string> peers;
  for (int i = 0; i < options.members; ++i) {
    Member member;
    member.name = absl::StrCat("member-", i);
    member.client_port = FreePortOtherThan(taken);
    taken.push_back(member.client_port);
    member.peer_port = FreePortOtherThan(taken);
    taken.push_back(member.peer_port);
    member.data_dir = dir_.Join(member.name + ".etcd");
    member.log_path = dir_.Join(member.name + ".log");
    peers.push_back(absl::StrCat(member.name, "=", Url(member.peer_port)));
    members_.push_back(std::move(member));
  }
  initial_cluster_ = absl::StrJoin(peers, ",");
  etcd::EtcdClientOptions client_options = ClientOptions();
  client_options.call_timeout = absl::Seconds(1);
  client_ = *etcd::EtcdClient::Create(client_options);
}

EtcdTestCluster::~EtcdTestCluster() {
  client_.reset();
  for (int i = 0; i < size(); ++i) KillMember(i);
}

std::vector<std::string> EtcdTestCluster::endpoints() const {
  std::vector<std::string> result;
  for (int i = 0; i < size(); ++i) result.push_back(endpoint(i));
  return result;
}

std::string EtcdTestCluster::endpoint(int member) const {
  return absl::StrCat("127.0.0.1:", members_[member].client_port);
}

etcd::EtcdClientOptions EtcdTestCluster::ClientOptions() const {
  etcd::EtcdClientOptions options;
  options.endpoints = endpoints();
  options.security.insecure = true;
  return options;
}

pid_t EtcdTestCluster::pid(int member) const {
  const Subprocess* process = members_[member].process.get();
  return process != nullptr && process->running() ? process->pid() : -1;
}

void EtcdTestCluster::Launch(int member) {
  Member& m = members_[member];
  // The cluster token is the same for every member (a member of another token is refused).
  const std::string token = absl::StrCat("granary-test-", getpid(), "-", members_[0].peer_port);
  std::vector<std::string> argv = {
      kEtcdBinary,
      "--name=" + m.name,
      "--data-dir=" + m.data_dir,
      "--listen-client-urls=" + Url(m.client_port),
      "--advertise-client-urls=" + Url(m.client_port),
      "--listen-peer-urls=" + Url(m.peer_port),
      "--initial-advertise-peer-urls=" + Url(m.peer_port),
      "--initial-cluster=" + initial_cluster_,
      "--initial-cluster-state=new",
      "--initial-cluster-token=" + token,
      absl::StrCat("--heartbeat-interval=", options_.heartbeat_ms),
      absl::StrCat("--election-timeout=", options_.election_ms),
      "--logger=zap",
      "--log-outputs=stderr",
  };
  if (options_.max_request_bytes > 0) {
    argv.push_back(absl::StrCat("--max-request-bytes=", options_.max_request_bytes));
  }
  if (options_.quota_backend_bytes > 0) {
    argv.push_back(absl::StrCat("--quota-backend-bytes=", options_.quota_backend_bytes));
  }
  m.process = std::make_unique<Subprocess>(argv, Subprocess::Stderr::kToFile, m.log_path);
  m.paused = false;
}

absl::Status EtcdTestCluster::AwaitMember(int member, absl::Time deadline) {
  absl::Status last = absl::UnavailableError("not asked yet");
  while (absl::Now() < deadline) {
    if (!members_[member].process->running() ||
        members_[member].process->WaitFor(std::chrono::milliseconds(0)) != -1) {
      return absl::UnavailableError(absl::StrCat(
          "etcd test member ", member, " (", endpoint(member), ") exited: ",
          members_[member].process->ExitDescription(), "; its log ends:\n", LogTail(member)));
    }
    absl::StatusOr<etcdserverpb::StatusResponse> status = client_->Status(endpoint(member));
    if (status.ok() && status->leader() != 0) return absl::OkStatus();
    last = status.ok() ? absl::UnavailableError("no leader known yet") : status.status();
    absl::SleepFor(kPollInterval);
  }
  return absl::UnavailableError(absl::StrCat("etcd test member ", member, " (", endpoint(member),
                                             ") not ready within ",
                                             absl::FormatDuration(options_.start_timeout), ": ",
                                             last.message(), "; its log ends:\n", LogTail(member)));
}

absl::StatusOr<int> EtcdTestCluster::LeaderIndex() {
  std::vector<uint64_t> ids(members_.size(), 0);
  uint64_t leader = 0;
  for (int i = 0; i < size(); ++i) {
    if (pid(i) < 0 || members_[i].paused) continue;
    absl::StatusOr<etcdserverpb::StatusResponse> status = client_->Status(endpoint(i));
    if (!status.ok()) continue;
    ids[i] = status->header().member_id();
    if (status->leader() != 0) leader = status->leader();
  }
  for (int i = 0; i < size(); ++i) {
    if (leader != 0 && ids[i] == leader) return i;
  }
  return absl::NotFoundError("etcd test cluster: no running member is the leader");
}

void EtcdTestCluster::KillMember(int member) {
  Subprocess* process = members_[member].process.get();
  if (process == nullptr || !process->running()) return;
  process->Kill(SIGKILL);
  process->Wait();
  members_[member].paused = false;
}

absl::Status EtcdTestCluster::RestartMember(int member) {
  KillMember(member);
  Launch(member);
  return AwaitMember(member, absl::Now() + options_.start_timeout);
}

void EtcdTestCluster::StopMember(int member) {
  if (pid(member) < 0) return;
  kill(pid(member), SIGSTOP);
  members_[member].paused = true;
}

void EtcdTestCluster::ContinueMember(int member) {
  if (pid(member) < 0) return;
  kill(pid(member), SIGCONT);
  members_[member].paused = false;
}

std::string EtcdTestCluster::LogTail(int member, int lines) const {
  std::ifstream log(members_[member].log_path);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(log, line)) {
    tail.push_back(line);
    if (static_cast<int>(tail.size()) > lines) tail.pop_front();
  }
  return absl::StrJoin(tail, "\n");
}

}  // namespace granary::testing
