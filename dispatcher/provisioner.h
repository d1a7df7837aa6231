// Provisioner: how the dispatcher gets more remote workers, or fewer (issue 17). Every policy
// period the dispatcher counts the workers its jobs want — one per unfinished remote task of a
// running epoch (a scaling step that adds tasks raises it), within [min_workers, max_workers] —
// and asks its provisioner for that many when the count changed (growing at once, shrinking
// only once it has stayed lower for a while) or the last request failed. A worker a provisioner
// starts registers with --take_over_load: if it finds no task waiting, it takes one from the
// most loaded worker (DispatcherState), so the tasks a scaling step doubled up spread out.
// Workers beyond what jobs need idle as standbys. Nothing here is journaled: the count is a
// function of the journaled state.
//
// Two provisioners:
//  * local (`granary cluster --max_workers N`): starts `granary worker` processes on this host
//    and stops idle ones it started (SIGTERM); a worker it started that died is started again.
//  * command: runs a user's shell command with the count, e.g.
//    `kubectl scale statefulset granary-worker --replicas={n}`, so that a Kubernetes
//    deployment scales for real; a command that fails (non-zero exit, or past its timeout) is
//    an error naming it, its exit and the end of its output, and changes nothing.
//
// Resize is called from one thread at a time (the dispatcher's background thread, which also
// owns the local provisioner's processes: a child dies with the thread that started it).
#ifndef GRANARY_DISPATCHER_PROVISIONER_H_
#define GRANARY_DISPATCHER_PROVISIONER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace granary {

class Provisioner {
 public:
  virtual ~Provisioner() = default;
  // Asks for `count` workers in all. `idle` lists live workers holding no task, which a
  // provisioner that can choose stops first. Errors name what failed; the dispatcher keeps its
  // workers as they are and asks again next period.
  virtual absl::Status Resize(int32_t count, const std::vector<std::string>& idle) = 0;
  // "local" or "command '<template>'", for logs and `granary status`.
  virtual std::string Describe() const = 0;
};

// Runs `command_template` with every "{n}" replaced by the count, through /bin/sh -c; it must
// exit 0 within `timeout`.
std::unique_ptr<Provisioner> NewCommandProvisioner(
    std::string command_template, std::chrono::milliseconds timeout = std::chrono::seconds(60));

struct LocalProvisionerOptions {
  // The `granary` executable, and the dispatcher's address the workers register with.
  std::string binary;
  std::string dispatcher_address;
  // Worker ids are <id_prefix><k> for k in [0, max_workers): the lowest free one is used (a
  // worker started again after dying gets its id back).
  std::string id_prefix = "worker-";
  int32_t max_workers = 0;
  // More worker flags; "{id}" in any is replaced by the worker's id (e.g. its TLS certificate,
  // --tls_cert=/c/tls/{id}.pem).
  std::vector<std::string> flags;
  // Each worker's stderr goes to <log_dir>/<id>.log; empty: the dispatcher's stderr.
  std::string log_dir;
};
std::unique_ptr<Provisioner> NewLocalProvisioner(LocalProvisionerOptions options);

}  // namespace granary

#endif  // GRANARY_DISPATCHER_PROVISIONER_H_
