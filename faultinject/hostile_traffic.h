// Hostile and misbehaving clients alongside a chaos run (issue 33, fault class 5): while the run's
// own trainer reads its job and the harness kills, cuts and restarts processes, another client —
// with the trainer's own credentials, so the servers' authorization does not stop it first —
// sends requests the servers must refuse (absurd counts, unknown ids, tasks of other jobs, stale
// epochs, strangers' heartbeats), and opens jobs of its own that it abandons mid-epoch. Every
// refusal must name what is wrong with the code the request deserves; a request a server must
// refuse that it accepts is a violation. While a server is down or restarting its answers are
// Unavailable or DeadlineExceeded: counted, not violations. The run's own digests must stay
// exact: that is the harness's verdict, not this class's.
//
// Not here, by design: a second live reader of the run's own consumer. One reader per consumer
// is issue 34's lease; until then such a reader would receive elements the trainer waits for.
#ifndef GRANARY_FAULTINJECT_HOSTILE_TRAFFIC_H_
#define GRANARY_FAULTINJECT_HOSTILE_TRAFFIC_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/security/credentials.h"

namespace granary {

struct HostileTrafficOptions {
  std::string dispatcher_address;
  // The workers' addresses, asked for each round (they are known once the workers serve).
  std::function<std::vector<std::string>()> worker_addresses;
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // The job the run's trainer reads (by name): its tasks, epochs and dataset are the targets.
  std::string job_name;
  // Which requests, in which order.
  uint64_t seed = 0;
  // Between two requests.
  int interval_ms = 20;
};

struct HostileTrafficReport {
  // Requests sent, by kind.
  std::map<std::string, int64_t> sent;
  // Answered Unavailable or DeadlineExceeded (a server down or restarting).
  int64_t unreachable = 0;
  // Jobs opened and abandoned.
  int64_t abandoned_jobs = 0;
  // Answers that were not what the request deserved: "<request>: <answer>"; the first 20.
  std::vector<std::string> violations;
  int64_t violation_count = 0;
};

class HostileTraffic {
 public:
  // Starts sending at once, from a thread of its own, until Stop().
  explicit HostileTraffic(HostileTrafficOptions options);
  ~HostileTraffic();  // Stops.
  HostileTraffic(const HostileTraffic&) = delete;
  HostileTraffic& operator=(const HostileTraffic&) = delete;

  // Stops sending (waiting for a request in flight) and returns what was sent and answered.
  HostileTrafficReport Stop();

 private:
  void Loop();
  void Record(const std::string& kind, const std::string& violation, bool unreachable)
      ABSL_LOCKS_EXCLUDED(mutex_);

  const HostileTrafficOptions options_;
  absl::Notification stop_;
  absl::Mutex mutex_;
  HostileTrafficReport report_ ABSL_GUARDED_BY(mutex_);
  std::thread thread_;
};

}  // namespace granary

#endif  // GRANARY_FAULTINJECT_HOSTILE_TRAFFIC_H_
