#include "bench/bench_service.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "security/certificate_authority.h"
#include "security/peer_identity.h"

namespace granary {
namespace {

// Replicas of a replicated service's dispatcher, and members of its etcd.
constexpr int kReplicas = 3;

}  // namespace

absl::StatusOr<BenchService> StartBenchService(const std::string& dir, const PipelineDef& def,
                                               BenchServiceOptions options) {
  std::filesystem::remove_all(dir);
  if (options.checkpoint_interval_ms > 0) {
    options.cluster.worker_flags.push_back("--checkpoint_dir=" + dir + "/checkpoints");
    options.cluster.worker_flags.push_back(
        absl::StrCat("--checkpoint_interval_ms=", options.checkpoint_interval_ms));
  }
  BenchService service;
  if (options.tls) {
    ASSIGN_OR_RETURN(std::shared_ptr<CertificateAuthority> ca,
                     CertificateAuthority::Create(dir + "/tls"));
    std::vector<std::string> hosts;
    if (!options.cluster.host.empty()) hosts.push_back(options.cluster.host);
    options.cluster.issue_certificate = [ca, hosts](const std::string& name,
                                                    const std::string& identity) {
      return ca->Issue(name, identity, hosts).value();
    };
    ASSIGN_OR_RETURN(const TransportSecurity client,
                     ca->Issue("bench", ClientIdentityUri("bench")));
    options.client.tls_ca_file = client.ca_file;
    options.client.tls_cert_file = client.cert_file;
    options.client.tls_key_file = client.key_file;
  } else {
    options.client.insecure = true;
  }
  if (options.replicated) {
    testing::EtcdTestCluster::Options etcd_options;
    etcd_options.members = kReplicas;
    ASSIGN_OR_RETURN(service.etcd, testing::EtcdTestCluster::Start(etcd_options));
    options.cluster.etcd_journal =
        absl::StrCat("etcd://", absl::StrJoin(service.etcd->endpoints(), ","), "/granary-bench");
    options.cluster.replicas = kReplicas;
  }
  service.cluster = std::make_unique<testing::LocalCluster>(dir, options.cluster);
  if (!service.cluster->ok()) {
    return absl::UnavailableError(absl::StrCat("the cluster in ", dir, " did not start"));
  }
  options.client.dispatcher_address = service.cluster->dispatcher_address();
  ASSIGN_OR_RETURN(service.client, Client::Connect(options.client));
  ASSIGN_OR_RETURN(service.dataset, service.client->RegisterPipeline(def));
  return service;
}

std::vector<pid_t> ControlPlanePids(const BenchService& service) {
  if (service.etcd == nullptr) return {service.cluster->dispatcher_pid()};
  std::vector<pid_t> pids;
  for (int replica = 0; replica < kReplicas; ++replica) {
    pids.push_back(service.cluster->dispatcher_pid(replica));
  }
  for (int member = 0; member < service.etcd->size(); ++member) {
    pids.push_back(service.etcd->pid(member));
  }
  return pids;
}

}  // namespace granary
