#include "faultinject/chaos_processes.h"

#include <signal.h>

#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/disk_fault_control.h"
#include "common/env.h"
#include "common/failpoint.h"
#include "common/grpc_status.h"
#include "common/loopback_port.h"
#include "common/status_macros.h"
#include "etcd/etcd_client.h"
#include "etcd/local_etcd_cluster.h"
#include "glog/logging.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "proto/dispatcher.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "security/certificate_authority.h"
#include "security/peer_identity.h"

namespace granary {
namespace {

constexpr char kClient[] = "client";
constexpr char kDispatcher[] = "dispatcher";
constexpr char kReplicaPrefix[] = "replica-";

// i of "replica-<i>"; -1 for another name.
int ReplicaIndex(absl::string_view name) {
  int index = -1;
  if (!absl::ConsumePrefix(&name, kReplicaPrefix) || !absl::SimpleAtoi(name, &index)) return -1;
  return index;
}

}  // namespace

std::optional<std::string> LeaderOf(const std::map<std::string, ReplicaProbe>& probes) {
  std::optional<std::string> leader;
  for (const auto& [name, probe] : probes) {
    if (probe.role != ReplicaProbe::Role::kLeader) continue;
    if (leader.has_value()) return std::nullopt;
    leader = name;
  }
  return leader;
}

ChaosProcesses::ChaosProcesses(const ChaosProcessesOptions& options) : options_(options) {}

ChaosProcesses::~ChaosProcesses() {
  for (auto& [name, p] : processes_) {
    if (p.subprocess != nullptr && p.subprocess->running()) Kill(name);
  }
}

std::string ChaosProcesses::log_path(const std::string& name) const {
  return absl::StrCat(options_.dir, "/logs/", name, ".log");
}

std::vector<std::string> ChaosProcesses::names() const {
  std::vector<std::string> out;
  for (const auto& [name, p] : processes_) out.push_back(name);
  return out;
}

void ChaosProcesses::Launch(const std::string& name, bool with_failpoints) {
  Process& p = processes_.at(name);
  const bool worker = absl::StartsWith(name, "worker-");
  std::vector<std::string> specs;
  if (with_failpoints && !options_.failpoints.empty() &&
      (options_.failpoint_process == name || (options_.failpoint_process == "workers" && worker) ||
       (options_.failpoint_process == kClient && IsClient(name)))) {
    specs.push_back(options_.failpoints);
  }
  if (worker && !options_.every_worker_failpoints.empty()) {
    specs.push_back(options_.every_worker_failpoints);
  }
  std::vector<std::string> environment;
  if (!specs.empty()) {
    environment.push_back(
        absl::StrCat(kFailpointsEnvironmentVariable, "=", absl::StrJoin(specs, ",")));
  }
  if (history_ != nullptr) {
    const std::string file = absl::StrCat(name, ".", incarnations_[name]++, ".tsv");
    environment.push_back(
        absl::StrCat(kHistoryEnvironmentVariable, "=", options_.history_dir, "/", file));
    RecordHistory("launch", absl::StrCat("process=", name, " file=", file));
  }
  const std::string network_namespace = network_ != nullptr ? network_->path(name) : "";
  if (!options_.disk_faults_dir.empty() && p.server) {
    environment.push_back(
        absl::StrCat(kDiskFaultsEnvironmentVariable, "=", options_.disk_faults_dir, "/", name));
  }
  if (options_.sync_ledgers && p.server) {
    p.ledgers.push_back(absl::StrCat(options_.dir, "/ledgers/", name, ".", ++p.starts));
    environment.push_back(absl::StrCat(kSyncLedgerEnvironmentVariable, "=", p.ledgers.back()));
  }
  if (options_.clocks.skew_env && !IsClient(name)) {
    environment.push_back(
        absl::StrCat(kSkewedClockEnvironmentVariable, "=", clock_path(name), ".skew"));
  }
  if (options_.clocks.fake_wall) {
    // DONT_FAKE_MONOTONIC: a real step moves CLOCK_REALTIME only. The offset file is re-read on
    // every clock call, so that a step lands when the harness makes it (a lease of 1 s would
    // otherwise expire before a cached offset is re-read).
    for (const std::string& variable :
         {absl::StrCat("LD_PRELOAD=", kLibfaketimePath), std::string("DONT_FAKE_MONOTONIC=1"),
          absl::StrCat("FAKETIME_TIMESTAMP_FILE=", clock_path(name)),
          std::string("FAKETIME_NO_CACHE=1")}) {
      environment.push_back(variable);
    }
  }
  p.subprocess = std::make_unique<Subprocess>(p.argv, Subprocess::Stderr::kToFile, log_path(name),
                                              environment, network_namespace);
  p.serving = false;
  p.started = std::chrono::steady_clock::now();
}

absl::StatusOr<bool> ChaosProcesses::Serving(const std::string& name) {
  Process& p = processes_.at(name);
  if (p.serving || !running(name)) return p.serving;
  const std::string address = p.subprocess->ReadListenAddress(std::chrono::milliseconds(0));
  if (address.empty()) {
    if (std::chrono::steady_clock::now() - p.started > std::chrono::minutes(1)) {
      return absl::UnavailableError(
          absl::StrCat(name, " did not start serving within a minute (see ", log_path(name), ")"));
    }
    return false;
  }
  if (!p.address.empty() && address != p.address) {
    return absl::UnavailableError(
        absl::StrCat(name, " came back at ", address, ", not ", p.address));
  }
  p.address = address;
  p.serving = true;
  // A restart must come back at the same address.
  for (std::string& arg : p.argv) {
    if (absl::StartsWith(arg, "--port=")) arg = "--port=" + address.substr(address.rfind(':') + 1);
  }
  return true;
}

absl::StatusOr<std::string> ChaosProcesses::LaunchAndAwait(const std::string& name) {
  Launch(name, true);
  bool restarted = false;
  while (true) {
    absl::StatusOr<bool> serving = Serving(name);
    if (!serving.ok()) return serving.status();
    if (*serving) return processes_[name].address;
    // Reaps it if it exited (running() is true until then).
    if (processes_[name].subprocess->WaitFor(std::chrono::milliseconds(0)) >= 0) {
      if (!restarted) {
        // A failpoint may fire before the dispatcher serves (its first journal record names the
        // cluster): restart it as a supervisor would, once.
        restarted = true;
        LOG(WARNING) << name << " exited at its start; restarting it";
        Launch(name, false);
        continue;
      }
      return absl::UnavailableError(
          absl::StrCat(name, " exited at its start (see ", log_path(name), ")"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

absl::Status ChaosProcesses::StartEtcd(CertificateAuthority* ca) {
  etcd::LocalEtcdOptions etcd_options;
  etcd_options.dir = options_.dir + "/etcd";
  etcd_options.members = 3;
  ASSIGN_OR_RETURN(etcd_options.security, LocalSecurityFor(ca, "etcd", "granary://etcd"));
  ASSIGN_OR_RETURN(const etcd::LocalEtcdCluster cluster,
                   etcd::LocalEtcdCluster::Plan(etcd_options));
  for (int i = 0; i < cluster.size(); ++i) {
    etcd_members_.push_back(std::make_unique<Subprocess>(
        cluster.Argv(i), Subprocess::Stderr::kToFile, log_path(absl::StrCat("etcd-", i))));
  }
  {
    ASSIGN_OR_RETURN(const std::unique_ptr<etcd::EtcdClient> client,
                     etcd::EtcdClient::Create(cluster.ClientOptions()));
    RETURN_IF_ERROR(cluster.AwaitReady(*client, absl::Now() + absl::Minutes(1)));
  }
  etcd_proxies_.resize(options_.replicas);
  for (auto& proxies : etcd_proxies_) {
    for (const etcd::LocalEtcdMember& member : cluster.members()) {
      ASSIGN_OR_RETURN(std::unique_ptr<TcpProxy> proxy, TcpProxy::Start(member.endpoint()));
      proxies.push_back(std::move(proxy));
    }
  }
  return absl::OkStatus();
}

absl::Status ChaosProcesses::StartProxies(std::map<std::string, int>& worker_ports) {
  if (options_.replicas > 0) {
    return absl::InvalidArgumentError("chaos: proxies on the links of a replicated dispatcher");
  }
  uint64_t seed = *options_.proxy_seed;
  const auto start = [&](const std::string& link, const std::string& upstream) -> absl::Status {
    ASSIGN_OR_RETURN(proxies_[link], TcpProxy::Start(upstream, seed++));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(start(absl::StrCat(kClient, ">", kDispatcher), dispatcher_address_));
  const int workers = options_.workers + options_.standby;
  for (int i = 0; i < workers; ++i) {
    RETURN_IF_ERROR(start(absl::StrCat("worker-", i, ">", kDispatcher), dispatcher_address_));
  }
  for (int i = 0; i < workers; ++i) {
    const std::string name = absl::StrCat("worker-", i);
    const int port = BindLoopbackPort(0);
    if (port == 0) return absl::UnavailableError("chaos: no free loopback port for " + name);
    worker_ports[name] = port;
    RETURN_IF_ERROR(start(absl::StrCat(kClient, ">", name), absl::StrCat("127.0.0.1:", port)));
  }
  return absl::OkStatus();
}

std::string ChaosProcesses::DispatcherAddressFor(const std::string& from) const {
  const auto proxy = proxies_.find(absl::StrCat(from, ">", kDispatcher));
  return proxy == proxies_.end() ? dispatcher_address_ : proxy->second->address();
}

absl::Status ChaosProcesses::InjectProxyFault(const ProxyFault& fault) {
  for (const std::string& link : fault.links) {
    if (proxies_.find(link) == proxies_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("chaos: no proxy on link '", link, "'"));
    }
  }
  for (const std::string& link : fault.links) {
    TcpProxy& proxy = *proxies_.at(link);
    if (fault.reset) {
      proxy.ResetConnections();
      continue;
    }
    proxy.SetToxics(ProxyDirection::kToUpstream, fault.to_server);
    proxy.SetToxics(ProxyDirection::kToClient, fault.to_client);
    proxy.SetTimeout(fault.timeout);
  }
  return absl::OkStatus();
}

std::string ChaosProcesses::clock_path(const std::string& name) const {
  return absl::StrCat(options_.dir, "/clock/", name);
}

absl::Status ChaosProcesses::WriteClockControl(const std::string& name, bool enabled,
                                               const std::string& path, const std::string& text) {
  if (!enabled) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot change ", name, "'s clock: the processes run without that fault"));
  }
  if (processes_.count(name) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("no process '", name, "' to change the clock of"));
  }
  // Written whole and renamed over: the reader never sees a partial control.
  RETURN_IF_ERROR(WriteStringToFile(Env::Default(), path + ".tmp", text, /*sync=*/false));
  return Env::Default()->RenameFile(path + ".tmp", path);
}

absl::Status ChaosProcesses::StepWallClock(const std::string& name, int64_t offset_seconds) {
  // "client": every consumer's.
  for (const std::string& each : Expand(name)) {
    RETURN_IF_ERROR(
        WriteClockControl(each, options_.clocks.fake_wall, clock_path(each),
                          absl::StrCat(offset_seconds >= 0 ? "+" : "", offset_seconds)));
  }
  return absl::OkStatus();
}

absl::Status ChaosProcesses::SkewEnvClock(const std::string& name, const ClockSkew& skew) {
  return WriteClockControl(name, options_.clocks.skew_env && !IsClient(name),
                           clock_path(name) + ".skew",
                           absl::StrCat(skew.rate, " ", skew.jump_seconds));
}

absl::Status ChaosProcesses::Start() {
  const std::string& dir = options_.dir;
  if (absl::Status made = Env::Default()->CreateDirs(dir + "/logs"); !made.ok()) return made;
  if (!options_.history_dir.empty()) {
    RETURN_IF_ERROR(Env::Default()->CreateDirs(options_.history_dir));
    ASSIGN_OR_RETURN(history_,
                     HistoryLog::Open(options_.history_dir + "/harness.0.tsv", "harness"));
  }
  if (options_.sync_ledgers) RETURN_IF_ERROR(Env::Default()->CreateDirs(dir + "/ledgers"));
  if (options_.clocks.fake_wall && !Env::Default()->FileExists(kLibfaketimePath)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the clock scenarios need libfaketime (", kLibfaketimePath,
                     "): install Debian's faketime package (scripts/setup_deps.sh does)"));
  }
  if (options_.clocks.fake_wall || options_.clocks.skew_env) {
    RETURN_IF_ERROR(Env::Default()->CreateDirs(dir + "/clock"));
  }
  std::unique_ptr<CertificateAuthority> ca;
  if (options_.tls) {
    ASSIGN_OR_RETURN(ca, CertificateAuthority::Create(dir + "/tls"));
  }
  ASSIGN_OR_RETURN(const TransportSecurity client_security,
                   LocalSecurityFor(ca.get(), "client", ClientIdentityUri("chaos")));
  ASSIGN_OR_RETURN(credentials_, ChannelCredentialsFor(client_security));
  std::string cache_root = dir + "/cache";
  if (options_.redis_cache) {
    redis_ = std::make_unique<LocalRedisServer>();
    if (!redis_->ok()) {
      return absl::UnavailableError(
          "the Redis cache tier: redis-server did not start (Debian's redis-server package)");
    }
    cache_root = redis_->url() + "/chaos";
  }
  if (options_.network_namespaces) {
    if (options_.replicas > 0) {
      return absl::InvalidArgumentError("network namespaces for the replicated dispatcher");
    }
    std::vector<std::string> members = clients();
    members.push_back(kDispatcher);
    for (int i = 0; i < options_.workers + options_.standby; ++i) {
      members.push_back(absl::StrCat("worker-", i));
    }
    absl::StatusOr<std::unique_ptr<NetworkNamespaces>> network = NetworkNamespaces::Create(members);
    if (!network.ok()) return Annotate(network.status(), "the network scenarios");
    network_ = *std::move(network);
  }
  // With network namespaces: a server's --host, and the address its certificate names.
  const auto hosts = [this](const std::string& name) {
    return network_ != nullptr ? std::vector<std::string>{network_->address(name)}
                               : std::vector<std::string>{};
  };
  const auto host_flags = [&](const std::string& name) {
    std::vector<std::string> flags;
    for (const std::string& host : hosts(name)) flags.push_back("--host=" + host);
    return flags;
  };
  std::vector<std::string> dispatcher_argv = {
      options_.binary, "dispatcher", "--cache_root=" + cache_root, "--port=0",
      "--worker_timeout_ms=1000", "--snapshot_every=50", "--data_roots=" + options_.data_root,
      // A violation aborts the dispatcher: the run fails loudly.
      "--check_invariants"};
  {
    ASSIGN_OR_RETURN(
        const TransportSecurity s,
        LocalSecurityFor(ca.get(), "dispatcher", kDispatcherIdentityUri, hosts(kDispatcher)));
    for (const std::string& flag : TransportSecurityFlags(s)) dispatcher_argv.push_back(flag);
    for (const std::string& flag : host_flags(kDispatcher)) dispatcher_argv.push_back(flag);
  }
  if (options_.replicas == 0) {
    processes_[kDispatcher].argv = dispatcher_argv;
    processes_[kDispatcher].argv.push_back("--journal_dir=" + dir + "/journal");
    ASSIGN_OR_RETURN(dispatcher_address_, LaunchAndAwait(kDispatcher));
  } else {
    if (absl::Status started = StartEtcd(ca.get()); !started.ok()) {
      return Annotate(started, "the replicated dispatcher's etcd");
    }
    std::vector<std::string> addresses;
    for (int i = 0; i < options_.replicas; ++i) {
      const std::string name = absl::StrCat(kReplicaPrefix, i);
      std::vector<std::string> endpoints;
      for (const auto& proxy : etcd_proxies_[i]) endpoints.push_back(proxy->address());
      Process& replica = processes_[name];
      replica.argv = dispatcher_argv;
      replica.argv.push_back(
          absl::StrCat("--journal=etcd://", absl::StrJoin(endpoints, ","), "/granary"));
      replica.argv.push_back("--replica_id=" + name);
      ASSIGN_OR_RETURN(std::string address, LaunchAndAwait(name));
      addresses.push_back(std::move(address));
    }
    dispatcher_address_ = absl::StrJoin(addresses, ",");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (!LeaderOf(ProbeReplicas()).has_value()) {
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::UnavailableError(absl::StrCat("no replica of ", dispatcher_address_,
                                                   " led within a minute (see ", dir, "/logs)"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  std::map<std::string, int> worker_ports;  // 0 (any free port) unless proxied
  if (options_.proxy_seed.has_value()) RETURN_IF_ERROR(StartProxies(worker_ports));
  for (int i = 0; i < options_.workers + options_.standby; ++i) {
    const std::string name = absl::StrCat("worker-", i);
    Process& w = processes_[name];
    w.argv = {options_.binary,
              "worker",
              "--dispatcher=" + DispatcherAddressFor(name),
              "--worker_id=" + name,
              absl::StrCat("--port=", worker_ports[name]),
              "--checkpoint_dir=" + dir + "/checkpoints",
              "--checkpoint_interval_ms=100",
              "--heartbeat_interval_ms=100",
              "--window_bytes=262144",
              "--data_roots=" + options_.data_root};
    ASSIGN_OR_RETURN(const TransportSecurity s,
                     LocalSecurityFor(ca.get(), name, WorkerIdentityUri(name), hosts(name)));
    for (const std::string& flag : TransportSecurityFlags(s)) w.argv.push_back(flag);
    for (const std::string& flag : host_flags(name)) w.argv.push_back(flag);
    if (i >= options_.workers) w.argv.push_back("--standby");
    if (const auto proxy = proxies_.find(absl::StrCat(kClient, ">", name));
        proxy != proxies_.end()) {
      w.argv.push_back("--advertise_address=" + proxy->second->address());
    }
    w.argv.insert(w.argv.end(), options_.extra_worker_flags.begin(),
                  options_.extra_worker_flags.end());
    Launch(name, true);
  }
  std::vector<std::vector<std::string>> consumers = options_.consumer_flags;
  if (consumers.empty()) consumers.emplace_back();
  const std::vector<std::string> client_names = clients();
  for (size_t i = 0; i < consumers.size(); ++i) {
    const std::string& name = client_names[i];
    Process& client = processes_[name];
    client.server = false;
    // Each consumer has one client; one restarted after a kill takes its consumer over at once
    // rather than wait for the dead one's lease to expire (and so exercises the takeover).
    client.argv = {options_.binary, "run", "--dispatcher=" + DispatcherAddressFor(kClient),
                   "--takeover"};
    for (const std::string& flag : TransportSecurityFlags(client_security)) {
      client.argv.push_back(flag);
    }
    client.argv.insert(client.argv.end(), options_.client_flags.begin(),
                       options_.client_flags.end());
    client.argv.insert(client.argv.end(), consumers[i].begin(), consumers[i].end());
    Launch(name, true);
  }
  return absl::OkStatus();
}

std::vector<std::string> ChaosProcesses::clients() const {
  if (options_.consumer_flags.empty()) return {kClient};
  std::vector<std::string> names;
  for (size_t i = 0; i < options_.consumer_flags.size(); ++i) {
    names.push_back(absl::StrCat(kClient, "-", i));
  }
  return names;
}

bool ChaosProcesses::IsClient(const std::string& name) {
  return name == kClient || absl::StartsWith(name, absl::StrCat(kClient, "-"));
}

std::vector<std::string> ChaosProcesses::Expand(const std::string& name) const {
  return name == kClient ? clients() : std::vector<std::string>{name};
}

absl::StatusOr<PowerLossReport> ChaosProcesses::PowerLoss(const std::vector<std::string>& names,
                                                          std::optional<uint64_t> torn_seed) {
  for (const std::string& name : names) {
    if (running(name)) Kill(name);
  }
  PowerLossReport dropped;
  for (const std::string& name : names) {
    Process& p = processes_.at(name);
    const absl::StatusOr<PowerLossReport> report = ApplyPowerLoss(p.ledgers, torn_seed);
    if (!report.ok()) return Annotate(report.status(), absl::StrCat("power loss of ", name));
    dropped.Add(*report);
    p.ledgers.clear();
  }
  return dropped;
}

bool ChaosProcesses::running(const std::string& name) const {
  auto it = processes_.find(name);
  return it != processes_.end() && it->second.subprocess != nullptr &&
         it->second.subprocess->running();
}

void ChaosProcesses::Kill(const std::string& name) {
  Subprocess& s = *processes_.at(name).subprocess;
  s.Kill(SIGKILL);
  s.Wait();
  RecordHistory("kill", "process=" + name);
}

void ChaosProcesses::Restart(const std::string& name) {
  if (running(name)) Kill(name);
  Launch(name, /*with_failpoints=*/false);
}

std::map<std::string, int> ChaosProcesses::ReapExited() {
  std::map<std::string, int> exited;
  for (auto& [name, p] : processes_) {
    if (p.subprocess == nullptr || !p.subprocess->running()) continue;
    const int code = p.subprocess->WaitFor(std::chrono::milliseconds(0));
    if (code >= 0) exited[name] = code;
  }
  return exited;
}

absl::Status ChaosProcesses::ScaleJob(const std::string& job_name, int32_t num_worker_slots,
                                      const std::string& reason) const {
  if (!running(kDispatcher) || !processes_.at(kDispatcher).serving) {
    return absl::UnavailableError("the dispatcher is not serving");
  }
  auto stub = Dispatcher::NewStub(grpc::CreateChannel(dispatcher_address_, credentials_));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  ScaleJobRequest request;
  request.set_job_name(job_name);
  request.set_num_worker_slots(num_worker_slots);
  request.set_reason(reason);
  ScaleJobResponse response;
  return FromGrpcStatus(stub->ScaleJob(&context, request, &response));
}

std::map<std::string, ReplicaProbe> ChaosProcesses::ProbeReplicas() const {
  std::vector<std::string> names;
  std::vector<std::string> addresses;
  for (const auto& [name, p] : processes_) {
    if (ReplicaIndex(name) < 0 || !running(name) || !p.serving) continue;
    names.push_back(name);
    addresses.push_back(p.address);
  }
  const std::vector<ReplicaProbe> probes =
      granary::ProbeReplicas(addresses, credentials_, absl::Seconds(1));
  std::map<std::string, ReplicaProbe> by_name;
  for (size_t i = 0; i < names.size(); ++i) by_name[names[i]] = probes[i];
  return by_name;
}

void ChaosProcesses::CutFromEtcd(const std::string& replica) {
  for (const auto& proxy : etcd_proxies_.at(ReplicaIndex(replica))) proxy->Cut();
}

void ChaosProcesses::HealFromEtcd(const std::string& replica) {
  for (const auto& proxy : etcd_proxies_.at(ReplicaIndex(replica))) proxy->Heal();
}

std::vector<std::string> ChaosProcesses::ServingWorkerAddresses() const {
  std::vector<std::string> addresses;
  for (const auto& [name, p] : processes_) {
    if (absl::StartsWith(name, "worker-") && running(name) && p.serving) {
      addresses.push_back(p.address);
    }
  }
  return addresses;
}

absl::Status ChaosProcesses::InjectNetworkFault(const NetworkFault& fault) {
  if (network_ == nullptr) {
    return absl::FailedPreconditionError("a network fault without network namespaces");
  }
  // "client": every consumer's (Expand).
  switch (fault.kind) {
    case NetworkFault::Kind::kHeal:
      return network_->HealAll();
    case NetworkFault::Kind::kLimit:
      for (const std::string& from : Expand(fault.from)) {
        RETURN_IF_ERROR(network_->Limit(from, fault.kbit_per_second));
      }
      return absl::OkStatus();
    case NetworkFault::Kind::kCut:
      break;
  }
  for (const std::string& from : Expand(fault.from)) {
    for (const std::string& to_name : fault.to) {
      for (const std::string& to : Expand(to_name)) {
        RETURN_IF_ERROR(network_->Cut(from, to,
                                      fault.one_way ? NetworkNamespaces::Direction::kOneWay
                                                    : NetworkNamespaces::Direction::kBothWays,
                                      fault.silent ? NetworkNamespaces::Visibility::kSilent
                                                   : NetworkNamespaces::Visibility::kRefused));
      }
    }
  }
  return absl::OkStatus();
}

void ChaosProcesses::RecordHistory(absl::string_view op, absl::string_view fields) {
  if (history_ != nullptr) history_->Record(op, "info", fields);
}

int64_t ChaosProcesses::CheckpointsWritten(const std::string& worker) const {
  auto it = processes_.find(worker);
  // Dial only a worker that announced its address since it last started (an empty address is
  // not a target; a restarted one is not listening yet).
  if (it == processes_.end() || !running(worker) || !it->second.serving) return -1;
  auto stub = Worker::NewStub(grpc::CreateChannel(it->second.address, credentials_));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  GetWorkerStatusResponse status;
  if (!stub->GetWorkerStatus(&context, GetWorkerStatusRequest(), &status).ok()) return -1;
  return status.checkpoints_written();
}

}  // namespace granary
