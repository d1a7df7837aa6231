#include "tools/server_files.h"

#include "common/status_macros.h"
#include "faultinject/skewed_clock_env.h"

namespace granary {

absl::StatusOr<std::unique_ptr<ServerFiles>> ServerFiles::FromEnvironment() {
  std::unique_ptr<ServerFiles> files(new ServerFiles());
  ASSIGN_OR_RETURN(files->disk_faults_,
                   ServerDiskFaults::FromEnvironment(DefaultEnvOrSkewedClock()));
  ASSIGN_OR_RETURN(files->files_, ServerFileEnv::FromEnvironment(files->disk_faults_->env()));
  return files;
}

}  // namespace granary
