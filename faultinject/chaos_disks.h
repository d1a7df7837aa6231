// ChaosDisks: the failing, full and slow disks of one `granary chaos` run's disk scenarios
// (chaos_plan.h, issue 33). A full disk is real: the target's directory is a small tmpfs,
// mounted before the processes start, that a fault fills with a filler file and the heal empties
// again. EIO and stalls are injected inside the processes: each dispatcher and worker follows
// its own control file (common/disk_fault_control.h; ChaosProcessesOptions::disk_faults_dir),
// which a fault writes and the heal empties. Thread-compatible.
#ifndef GRANARY_FAULTINJECT_CHAOS_DISKS_H_
#define GRANARY_FAULTINJECT_CHAOS_DISKS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "faultinject/chaos_plan.h"
#include "faultinject/tmpfs_mount.h"

namespace granary {

class ChaosDisks {
 public:
  // The size of a full-disk scenario's tmpfs.
  static constexpr int64_t kTmpfsBytes = 64 << 20;

  // The directory of `target` ("journal", "checkpoints" or "cache") in the run directory
  // `run_dir`, where ChaosProcesses puts it.
  static std::string TargetDir(const std::string& run_dir, const std::string& target);

  // Prepares the disk faults of `plan`: mounts the tmpfs a full-disk fault fills on its target's
  // directory — FailedPrecondition saying the scenario needs root, without it — and creates the
  // directory of the processes' control files.
  static absl::StatusOr<std::unique_ptr<ChaosDisks>> Prepare(const std::string& run_dir,
                                                             const ChaosPlan& plan);

  // Where the process "<name>" reads its disk faults: <control_dir>/<name>.
  const std::string& control_dir() const { return control_dir_; }

  // Injects `fault`, or heals the disk of its target (the filler deleted, its process's control
  // file emptied).
  absl::Status Apply(const ChaosDiskFault& fault);

 private:
  ChaosDisks(std::string run_dir, std::string control_dir, std::unique_ptr<TmpfsMount> tmpfs)
      : run_dir_(std::move(run_dir)),
        control_dir_(std::move(control_dir)),
        tmpfs_(std::move(tmpfs)) {}
  // The control file of `process`.
  std::string ControlFile(const std::string& process) const;

  const std::string run_dir_;
  const std::string control_dir_;
  // The full-disk fault's tmpfs (nullptr: the plan has none); unmounted after the processes
  // using it were killed, as ChaosRun destroys them first.
  std::unique_ptr<TmpfsMount> tmpfs_;
};

}  // namespace granary

#endif  // GRANARY_FAULTINJECT_CHAOS_DISKS_H_
