// What the service benchmarks read from: a real cluster (tests/local_cluster.h: a dispatcher and
// workers as processes on 127.0.0.1) in a fresh directory — or, replicated, three dispatcher
// replicas over a real 3-member etcd (testing/etcd_test_cluster.h) —, a client connected to it,
// and the benchmark's pipeline registered.
#ifndef GRANARY_BENCH_BENCH_SERVICE_H_
#define GRANARY_BENCH_BENCH_SERVICE_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "granary/client.h"
#include "proto/pipeline.pb.h"
#include "testing/etcd_test_cluster.h"
#include "tests/local_cluster.h"

namespace granary {

struct BenchServiceOptions {
  testing::LocalClusterOptions cluster;
  // > 0: the workers checkpoint every this many ms into <dir>/checkpoints (shared by all).
  int64_t checkpoint_interval_ms = 0;
  // The client's options; dispatcher_address and the transport security are filled in.
  ClientOptions client;
  // Mutual TLS with a throwaway CA in <dir>/tls (security/certificate_authority.h); false:
  // plain text.
  bool tls = false;
  // The replicated dispatcher (issue 32): 3 replicas (`granary dispatcher --journal etcd://...`)
  // over a 3-member etcd started for the service, instead of one dispatcher over RocksDB.
  // Overrides cluster.etcd_journal and cluster.replicas.
  bool replicated = false;
};

struct BenchService {
  // Replicated: the etcd holding the journal (stopped after the cluster); else null.
  std::unique_ptr<testing::EtcdTestCluster> etcd;
  std::unique_ptr<testing::LocalCluster> cluster;
  std::unique_ptr<Client> client;
  std::string dataset;  // `def`'s registered id.
};

// Wipes `dir`, starts the cluster there, connects and registers `def`.
absl::StatusOr<BenchService> StartBenchService(const std::string& dir, const PipelineDef& def,
                                               BenchServiceOptions options = {});

// The processes of `service`'s control plane: its dispatcher, or its replicas and etcd's members.
std::vector<pid_t> ControlPlanePids(const BenchService& service);

}  // namespace granary

#endif  // GRANARY_BENCH_BENCH_SERVICE_H_
