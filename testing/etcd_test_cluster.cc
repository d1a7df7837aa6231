#include "testing/etcd_test_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <deque>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace granary::testing {

absl::StatusOr<std::unique_ptr<EtcdTestCluster>> EtcdTestCluster::Start(const Options& options) {
  auto dir = std::make_unique<ScopedTempDir>();
  etcd::LocalEtcdOptions plan_options = options;
  plan_options.dir = dir->path();
  ASSIGN_OR_RETURN(etcd::LocalEtcdCluster plan, etcd::LocalEtcdCluster::Plan(plan_options));
  std::unique_ptr<EtcdTestCluster> cluster(
      new EtcdTestCluster(options, std::move(dir), std::move(plan)));
  for (int i = 0; i < cluster->size(); ++i) cluster->Launch(i);
  const absl::Time deadline = absl::Now() + options.start_timeout;
  for (int i = 0; i < cluster->size(); ++i) RETURN_IF_ERROR(cluster->AwaitMember(i, deadline));
  RETURN_IF_ERROR(cluster->client_->Range("granary-test-cluster-ready").status());
  return cluster;
}

EtcdTestCluster::EtcdTestCluster(const Options& options, std::unique_ptr<ScopedTempDir> dir,
                                 etcd::LocalEtcdCluster plan)
    : options_(options), dir_(std::move(dir)), plan_(std::move(plan)) {
  for (const etcd::LocalEtcdMember& planned : plan_.members()) {
    members_.push_back(Member{dir_->Join(planned.name + ".log")});
  }
  etcd::EtcdClientOptions client_options = ClientOptions();
  client_options.call_timeout = absl::Seconds(1);
  client_ = *etcd::EtcdClient::Create(client_options);
}

EtcdTestCluster::~EtcdTestCluster() {
  client_.reset();
  for (int i = 0; i < size(); ++i) KillMember(i);
}

std::vector<std::string> EtcdTestCluster::endpoints() const { return plan_.endpoints(); }

std::string EtcdTestCluster::endpoint(int member) const {
  return plan_.members()[member].endpoint();
}

etcd::EtcdClientOptions EtcdTestCluster::ClientOptions() const { return plan_.ClientOptions(); }

pid_t EtcdTestCluster::pid(int member) const {
  const Subprocess* process = members_[member].process.get();
  return process != nullptr && process->running() ? process->pid() : -1;
}

void EtcdTestCluster::Launch(int member) {
  Member& m = members_[member];
  m.process =
      std::make_unique<Subprocess>(plan_.Argv(member), Subprocess::Stderr::kToFile, m.log_path);
  m.paused = false;
}

absl::Status EtcdTestCluster::AwaitMember(int member, absl::Time deadline) {
  const absl::Status ready =
      plan_.AwaitMember(*client_, member, deadline, members_[member].process.get());
  if (ready.ok()) return ready;
  return absl::Status(ready.code(),
                      absl::StrCat(ready.message(), "; its log ends:\n", LogTail(member)));
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
  members_[member].process->Pause();
  members_[member].paused = true;
}

void EtcdTestCluster::ContinueMember(int member) {
  if (pid(member) < 0) return;
  members_[member].process->Kill(SIGCONT);
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
