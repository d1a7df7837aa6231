// ClusterSupervisor: the child processes of `granary cluster` (a dispatcher or dispatcher
// replicas, workers, and the replicas' etcd members), kept in charge the way a process supervisor
// keeps its services.
//
// A member is a Granary server started from its argv (Start); it must announce its address as its
// first stdout line (subprocess.h, kListeningOn) within a minute. Its "--port=" argument is then
// pinned to the port it got, so a restart comes back at the same address under the same id.
// Or it is another server listening on a loopback port its argv names (StartOnLoopbackPort, an
// etcd member), up once that port accepts connections (within a minute).
//
// Run() waits for signals and child exits (SIGCHLD), never polling:
// - every exit of a member is reaped at once and reported: "worker-1 (pid 123) was killed by
//   signal 9 (SIGKILL)";
// - with `restart`, a dead member is restarted by the supervisor after a back-off that starts at
//   `initial_backoff` and doubles with each death up to `max_backoff` (reset once the member
//   has been up for `stable_after`); without it, the death is reported with how to restart;
// - SIGHUP restarts every dead member at once (the restart path `granary cluster` prints, so a
//   restarted process is still the cluster's child, stopped with it);
// - SIGINT or SIGTERM ends Run(), which then stops every member (SIGTERM, SIGKILL after 5 s;
//   workers first, then the dispatchers, then the etcd members) and reports each exit.
// Every line goes to `out` (flushed), one event per line. Single-threaded: the caller must
// block the signals (BlockSupervisorSignals) before starting any thread.
#ifndef GRANARY_TOOLS_CLUSTER_SUPERVISOR_H_
#define GRANARY_TOOLS_CLUSTER_SUPERVISOR_H_

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/subprocess.h"

namespace granary {

struct ClusterSupervisorOptions {
  bool restart = false;
  std::chrono::milliseconds initial_backoff{250};
  std::chrono::milliseconds max_backoff{30000};
  std::chrono::milliseconds stable_after{30000};
  // Where each member's stderr is appended: <log_dir>/<name>.log.
  std::string log_dir;
  FILE* out = stdout;
};

// Blocks SIGINT, SIGTERM, SIGHUP and SIGCHLD in the calling thread (and the threads it starts
// afterwards), for Run() to wait for them. Children start with every signal unblocked.
void BlockSupervisorSignals();

class ClusterSupervisor {
 public:
  explicit ClusterSupervisor(ClusterSupervisorOptions options);
  // Kills (SIGKILL) and reaps the members still running.
  ~ClusterSupervisor();
  ClusterSupervisor(const ClusterSupervisor&) = delete;
  ClusterSupervisor& operator=(const ClusterSupervisor&) = delete;

  // Starts a member and waits for its address; reports "<kind> [<name> ]ADDRESS pid P[ <note>]"
  // (kind "dispatcher" or "worker"; the name is left out when it equals the kind). Returns the
  // address. Errors: Unavailable naming the member and its log if it did not announce an address
  // (it is then stopped), Cancelled if SIGINT or SIGTERM arrived meanwhile.
  absl::StatusOr<std::string> Start(const std::string& kind, const std::string& name,
                                    std::vector<std::string> argv, const std::string& note = "");
  // Starts a member that announces nothing and listens on 127.0.0.1:`port` (kind "etcd"), and
  // waits until that port accepts connections; reports it as Start does. Errors as Start's.
  absl::Status StartOnLoopbackPort(const std::string& kind, const std::string& name,
                                   std::vector<std::string> argv, int port);

  // Supervises the members until SIGINT or SIGTERM, then stops them all. Returns the signal.
  int Run();
  // Stops every running member (workers, then dispatchers, then etcd members) and reports each
  // exit.
  void StopAll();

 private:
  using Clock = std::chrono::steady_clock;
  struct Member {
    std::string kind;
    std::string name;
    std::string note;
    std::vector<std::string> argv;
    // Of a member started by StartOnLoopbackPort: the port it is up on; else 0.
    int loopback_port = 0;
    std::unique_ptr<Subprocess> process;
    Clock::time_point started;
    // When to restart it if it is dead; time_point::max() = not scheduled.
    Clock::time_point restart_at = Clock::time_point::max();
    std::chrono::milliseconds backoff{0};
    int restarts = 0;
  };

  // Adds `m` and launches it; removes it again if it does not start.
  absl::StatusOr<std::string> Add(Member m);
  // Starts `m` (again) and reads its address (or waits for its loopback port); reports it with
  // `suffix`. Errors as Start's.
  absl::StatusOr<std::string> Launch(Member& m, const std::string& suffix);
  // Whether `m` was started and has ended (and been reaped).
  static bool Dead(const Member& m);
  // After `m` died: schedules its restart with back-off, or says how to restart it.
  void OnDeath(Member& m);
  // Reaps and reports every member that ended.
  void ReapExited();
  // Restarts the dead members whose time has come; a failed start is another death. False if
  // SIGINT or SIGTERM interrupted a start.
  bool RestartDue();
  void Say(const std::string& line);

  const ClusterSupervisorOptions options_;
  std::vector<Member> members_;
};

}  // namespace granary

#endif  // GRANARY_TOOLS_CLUSTER_SUPERVISOR_H_
