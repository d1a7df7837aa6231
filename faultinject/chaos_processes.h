// The processes of one `granary chaos` run: a dispatcher, workers (+ standbys) and a client
// (`granary run`), each started from the granary binary on 127.0.0.1 with its stderr in
// <dir>/logs/<name>.log, each killable and restartable with the same identity, flags and address.
// Starting never waits for a worker to serve (it registers with a dispatcher that may itself be
// down, waiting for the harness to restart it): Serving() polls for its announcement. Every
// process still running is SIGKILLed when this object is destroyed. Thread-compatible.
#ifndef GRANARY_FAULTINJECT_CHAOS_PROCESSES_H_
#define GRANARY_FAULTINJECT_CHAOS_PROCESSES_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/subprocess.h"
#include "grpcpp/security/credentials.h"

namespace granary {

struct ChaosProcessesOptions {
  std::string binary;  // The granary binary.
  std::string dir;     // Journal, cache, checkpoints, logs, client outputs.
  // The dispatcher's and workers' --data_roots (where the pipeline's files are).
  std::string data_root;
  // Every connection over TLS with certificates of a throwaway CA in <dir>/tls (the
  // dispatcher's, each worker's naming its id, the client's); false: plain text (--insecure).
  bool tls = true;
  int workers = 2;
  int standby = 0;
  // The client's command line after "granary run --dispatcher HOST:PORT".
  std::vector<std::string> client_flags;
  // Flags added to every worker's command line.
  std::vector<std::string> extra_worker_flags;
  // GRANARY_FAILPOINTS for the first start of one process ("workers" = every worker); restarts
  // run without.
  std::string failpoint_process;
  std::string failpoints;
  // GRANARY_FAILPOINTS for every start of every worker, restarts included (joined with
  // `failpoints` where those are armed too); empty: none.
  std::string every_worker_failpoints;
};

class ChaosProcesses {
 public:
  explicit ChaosProcesses(const ChaosProcessesOptions& options);
  ~ChaosProcesses();

  // Starts the dispatcher and waits until it serves, then starts the workers and the client.
  absl::Status Start();

  // Names of every process: dispatcher, worker-0…, client.
  std::vector<std::string> names() const;
  bool running(const std::string& name) const;
  // SIGKILLs `name` and reaps it.
  void Kill(const std::string& name);
  // Starts `name` again (same flags and address; no failpoints).
  void Restart(const std::string& name);
  // Whether `name` (a server) announced its address since it was last started. Unavailable if it
  // came back at another address, or has not announced within a minute of its start.
  absl::StatusOr<bool> Serving(const std::string& name);

  // Processes that ended by themselves since the last call, with their exit codes.
  std::map<std::string, int> ReapExited();

  // Checkpoints `worker` wrote since it started (its status RPC); -1 if it does not answer or
  // has not announced its address since it started (Serving), in which case it is not dialed.
  int64_t CheckpointsWritten(const std::string& worker) const;
  // Scales job `job_name` to `num_worker_slots` tasks per consumer (ScaleJob, as the client
  // would). Unavailable while the dispatcher is down or restarting: the caller tries again.
  absl::Status ScaleJob(const std::string& job_name, int32_t num_worker_slots,
                        const std::string& reason) const;

  const std::string& dispatcher_address() const { return dispatcher_address_; }
  std::string log_path(const std::string& name) const;

 private:
  struct Process {
    std::vector<std::string> argv;
    std::unique_ptr<Subprocess> subprocess;
    bool server = true;
    // Servers: the address announced (kept across restarts), whether this start announced it,
    // and when it started.
    std::string address;
    bool serving = false;
    std::chrono::steady_clock::time_point started;
  };
  void Launch(const std::string& name, bool with_failpoints);

  const ChaosProcessesOptions options_;
  std::map<std::string, Process> processes_;
  std::string dispatcher_address_;
  // Of the status calls to workers.
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
};

}  // namespace granary

#endif  // GRANARY_FAULTINJECT_CHAOS_PROCESSES_H_
