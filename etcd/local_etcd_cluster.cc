#include "etcd/local_etcd_cluster.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "common/loopback_port.h"
#include "common/status_macros.h"

namespace granary::etcd {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

std::string Url(int port, bool tls = false) {
  return absl::StrCat(tls ? "https" : "http", "://127.0.0.1:", port);
}

// A free loopback port not in `taken` (a member's ports are all chosen before any is bound).
absl::StatusOr<int> FreePortOtherThan(const std::vector<int>& taken) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = BindLoopbackPort(0);
    if (port != 0 && std::find(taken.begin(), taken.end(), port) == taken.end()) return port;
  }
  return absl::UnavailableError("local etcd cluster: no free loopback port");
}

// The members file: one line "<name> <client_port> <peer_port>" per member (FORMAT.md).
absl::StatusOr<std::vector<LocalEtcdMember>> ReadMembers(const std::string& path,
                                                         const std::string& text) {
  std::vector<LocalEtcdMember> members;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    ++line_number;
    const std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    LocalEtcdMember member;
    if (fields.size() != 3 || fields[0] != absl::StrCat("member-", members.size()) ||
        !absl::SimpleAtoi(fields[1], &member.client_port) ||
        !absl::SimpleAtoi(fields[2], &member.peer_port)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": '", line,
                                                     "' is not 'member-", members.size(),
                                                     " CLIENT_PORT PEER_PORT'"));
    }
    member.name = std::string(fields[0]);
    members.push_back(std::move(member));
  }
  return members;
}

}  // namespace

std::string LocalEtcdMember::endpoint() const { return absl::StrCat("127.0.0.1:", client_port); }

absl::StatusOr<LocalEtcdCluster> LocalEtcdCluster::Plan(const LocalEtcdOptions& options) {
  if (access(kEtcdBinary, X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(kEtcdBinary, " is missing (Debian's etcd-server): run scripts/setup_deps.sh"));
  }
  if (options.members != 1 && options.members != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("local etcd cluster: members must be 1 or 3, is ", options.members));
  }
  Env* env = Env::Default();
  RETURN_IF_ERROR(env->CreateDirs(options.dir));
  const std::string path = options.dir + "/members";
  std::vector<LocalEtcdMember> members;
  if (env->FileExists(path)) {
    ASSIGN_OR_RETURN(const std::string text, ReadFileToString(env, path));
    ASSIGN_OR_RETURN(members, ReadMembers(path, text));
    if (static_cast<int>(members.size()) != options.members) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " lists ", members.size(), " member(s), not ", options.members,
                       " (it is of an etcd cluster of another size)"));
    }
  } else {
    std::vector<int> taken;
    std::string text;
    for (int i = 0; i < options.members; ++i) {
      LocalEtcdMember& member = members.emplace_back();
      member.name = absl::StrCat("member-", i);
      ASSIGN_OR_RETURN(member.client_port, FreePortOtherThan(taken));
      taken.push_back(member.client_port);
      ASSIGN_OR_RETURN(member.peer_port, FreePortOtherThan(taken));
      taken.push_back(member.peer_port);
      absl::StrAppend(&text, member.name, " ", member.client_port, " ", member.peer_port, "\n");
    }
    RETURN_IF_ERROR(WriteStringToFile(env, path, text, /*sync=*/true));
  }
  for (LocalEtcdMember& member : members) {
    member.data_dir = absl::StrCat(options.dir, "/", member.name, ".etcd");
  }
  return LocalEtcdCluster(options, std::move(members));
}

LocalEtcdCluster::LocalEtcdCluster(const LocalEtcdOptions& options,
                                   std::vector<LocalEtcdMember> members)
    : options_(options), members_(std::move(members)) {}

std::vector<std::string> LocalEtcdCluster::endpoints() const {
  std::vector<std::string> result;
  for (const LocalEtcdMember& member : members_) result.push_back(member.endpoint());
  return result;
}

EtcdClientOptions LocalEtcdCluster::ClientOptions() const {
  EtcdClientOptions options;
  options.endpoints = endpoints();
  options.security = options_.security;
  return options;
}

std::vector<std::string> LocalEtcdCluster::Argv(int member) const {
  const LocalEtcdMember& m = members_[member];
  std::vector<std::string> peers;
  for (const LocalEtcdMember& each : members_) {
    peers.push_back(absl::StrCat(each.name, "=", Url(each.peer_port)));
  }
  std::vector<std::string> argv = {
      kEtcdBinary,
      "--name=" + m.name,
      "--data-dir=" + m.data_dir,
      "--listen-client-urls=" + Url(m.client_port, options_.security.tls()),
      "--advertise-client-urls=" + Url(m.client_port, options_.security.tls()),
      "--listen-peer-urls=" + Url(m.peer_port),
      "--initial-advertise-peer-urls=" + Url(m.peer_port),
      "--initial-cluster=" + absl::StrJoin(peers, ","),
      "--initial-cluster-state=new",
      // The same on every member (a member of another token is refused), and another for each
      // cluster planned.
      absl::StrCat("--initial-cluster-token=granary-local-", members_[0].peer_port),
      absl::StrCat("--heartbeat-interval=", options_.heartbeat_ms),
      absl::StrCat("--election-timeout=", options_.election_ms),
      "--logger=zap",
      "--log-outputs=stderr",
  };
  if (options_.security.tls()) {
    argv.insert(
        argv.end(),
        {"--cert-file=" + options_.security.cert_file, "--key-file=" + options_.security.key_file,
         "--trusted-ca-file=" + options_.security.ca_file, "--client-cert-auth"});
  }
  if (options_.max_request_bytes > 0) {
    argv.push_back(absl::StrCat("--max-request-bytes=", options_.max_request_bytes));
  }
  if (options_.quota_backend_bytes > 0) {
    argv.push_back(absl::StrCat("--quota-backend-bytes=", options_.quota_backend_bytes));
  }
  return argv;
}

absl::Status LocalEtcdCluster::AwaitMember(EtcdClient& client, int member, absl::Time deadline,
                                           Subprocess* process) const {
  const std::string endpoint = members_[member].endpoint();
  absl::Status last = absl::UnavailableError("not asked yet");
  while (absl::Now() < deadline) {
    if (process != nullptr &&
        (!process->running() || process->WaitFor(std::chrono::milliseconds(0)) != -1)) {
      return absl::UnavailableError(absl::StrCat("etcd member ", member, " (", endpoint,
                                                 ") exited: ", process->ExitDescription()));
    }
    absl::StatusOr<etcdserverpb::StatusResponse> status = client.Status(endpoint);
    if (status.ok() && status->leader() != 0) return absl::OkStatus();
    last = status.ok() ? absl::UnavailableError("no leader known yet") : status.status();
    absl::SleepFor(kPollInterval);
  }
  return absl::UnavailableError(absl::StrCat("etcd member ", member, " (", endpoint,
                                             ") not ready in time: ", last.message()));
}

absl::Status LocalEtcdCluster::AwaitReady(EtcdClient& client, absl::Time deadline) const {
  for (int i = 0; i < size(); ++i) RETURN_IF_ERROR(AwaitMember(client, i, deadline));
  return client.Range("granary-local-cluster-ready").status();
}

}  // namespace granary::etcd
