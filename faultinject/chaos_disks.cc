#include "faultinject/chaos_disks.h"

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/status_macros.h"

namespace granary {
namespace {

constexpr char kFiller[] = "chaos-disk-filler";

}  // namespace

std::string ChaosDisks::TargetDir(const std::string& run_dir, const std::string& target) {
  return absl::StrCat(run_dir, "/", target);
}

absl::StatusOr<std::unique_ptr<ChaosDisks>> ChaosDisks::Prepare(const std::string& run_dir,
                                                                const ChaosPlan& plan) {
  std::unique_ptr<TmpfsMount> tmpfs;
  for (const ChaosFault& fault : plan.faults) {
    if (!fault.disk.has_value() || fault.disk->kind != ChaosDiskFault::Kind::kFull) continue;
    absl::StatusOr<std::unique_ptr<TmpfsMount>> mounted =
        TmpfsMount::Mount(TargetDir(run_dir, fault.disk->target), kTmpfsBytes);
    if (absl::IsFailedPrecondition(mounted.status())) {
      return absl::FailedPreconditionError(
          absl::StrCat("chaos scenario ", plan.scenario,
                       " fills a real disk, which needs root: ", mounted.status().message()));
    }
    RETURN_IF_ERROR(mounted.status());
    tmpfs = *std::move(mounted);
  }
  const std::string control_dir = run_dir + "/disk_faults";
  RETURN_IF_ERROR(Env::Default()->CreateDirs(control_dir));
  return std::unique_ptr<ChaosDisks>(new ChaosDisks(run_dir, control_dir, std::move(tmpfs)));
}

std::string ChaosDisks::ControlFile(const std::string& process) const {
  return absl::StrCat(control_dir_, "/", process);
}

absl::Status ChaosDisks::Apply(const ChaosDiskFault& fault) {
  const std::string dir = TargetDir(run_dir_, fault.target);
  switch (fault.kind) {
    case ChaosDiskFault::Kind::kFull:
      return tmpfs_->Fill(kFiller).status();
    case ChaosDiskFault::Kind::kEio:
    case ChaosDiskFault::Kind::kStall: {
      DiskFault injected;
      injected.kind = fault.kind == ChaosDiskFault::Kind::kEio ? DiskFault::Kind::kEio
                                                               : DiskFault::Kind::kStall;
      injected.op = fault.op;
      injected.path_prefix = dir;
      injected.stall = absl::Milliseconds(fault.stall_ms);
      return ReplaceDiskFaultControlFile(ControlFile(fault.process),
                                         DiskFaultLine(injected) + "\n");
    }
    case ChaosDiskFault::Kind::kHeal:
      if (tmpfs_ != nullptr && Env::Default()->FileExists(tmpfs_->Join(kFiller))) {
        RETURN_IF_ERROR(Env::Default()->DeleteFile(tmpfs_->Join(kFiller)));
      }
      return fault.process.empty() ? absl::OkStatus()
                                   : ReplaceDiskFaultControlFile(ControlFile(fault.process), "");
  }
  return absl::OkStatus();
}

}  // namespace granary
