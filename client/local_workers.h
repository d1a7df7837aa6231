// LocalWorkers: Pecan's local workers (issue 17) — `granary worker` processes a trainer starts
// on its own host for one consumer of one job (JobSpec.local_workers). Each registers with the
// dispatcher as local to that consumer (--local_to JOB/CONSUMER), so it runs only that
// consumer's local tasks (JobOptions.num_local_slots) and no other job's, and the trainer reads
// it through shared memory (transport/shm_server.h) like any worker on its host.
//
// The processes are started, and owned until the object is destroyed, by a thread of its own:
// a child dies with the thread that started it (PR_SET_PDEATHSIG, common/subprocess.h), so they
// must not belong to whichever trainer thread happened to open the epoch. Destroying the object
// stops them (SIGKILL): a local worker holds nothing the job needs — the dispatcher moves its
// tasks to other workers once it is silent — so the trainer's exit, however abrupt, loses
// nothing. Thread-compatible.
#ifndef GRANARY_CLIENT_LOCAL_WORKERS_H_
#define GRANARY_CLIENT_LOCAL_WORKERS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"

namespace granary {

struct LocalWorkersOptions {
  // The `granary` executable (LocalWorkersBinary finds one).
  std::string binary;
  std::string dispatcher_address;
  int64_t job_id = 0;
  int32_t consumer = 0;
  int32_t count = 0;
  // More worker flags: TLS files (a worker certificate), --data_roots, --plugin, --threads...
  std::vector<std::string> flags;
  // Each worker's stderr is appended to <log_dir>/<worker id>.log; empty: the trainer's stderr.
  std::string log_dir;
};

class LocalWorkers {
 public:
  // Starts options.count workers and waits until each serves (has registered and announced its
  // address). FailedPrecondition naming the binary if it cannot be run; Unavailable naming the
  // worker (and its log) if one does not come up within 30 s — the others are stopped then.
  static absl::StatusOr<std::unique_ptr<LocalWorkers>> Start(const LocalWorkersOptions& options);
  ~LocalWorkers();
  LocalWorkers(const LocalWorkers&) = delete;
  LocalWorkers& operator=(const LocalWorkers&) = delete;

  // The workers' ids and addresses, in start order.
  const std::vector<std::string>& worker_ids() const { return ids_; }
  const std::vector<std::string>& addresses() const { return addresses_; }
  // Their process ids (for tests that kill one).
  const std::vector<int>& pids() const { return pids_; }

 private:
  LocalWorkers() = default;

  std::vector<std::string> ids_;
  std::vector<std::string> addresses_;
  std::vector<int> pids_;
  absl::Notification stop_;
  std::thread owner_;
};

// The `granary` executable local workers run: `configured` if set, else $GRANARY_BINARY, else
// this process if it is `granary`, else `granary` on $PATH. FailedPrecondition if none is
// found, saying how to name one.
absl::StatusOr<std::string> LocalWorkersBinary(const std::string& configured);

}  // namespace granary

#endif  // GRANARY_CLIENT_LOCAL_WORKERS_H_
