#include "tools/commands.h"

#include <string>

#include "absl/algorithm/container.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "tools/command_flags.h"

namespace granary {

const std::vector<Command>& Commands() {
  // One command's flags packed in lines, as written.
  // clang-format off
  static const auto* const commands = new std::vector<Command>{
      {"local",
       LocalCommand,
       {"pipeline", "epochs", "seed", "digest_out", "cache_policy", "plugin", "auto_order"}},
      {"datagen", DatagenCommand, {"out", "images", "files", "size", "datagen_seed"}},
      {"dispatcher",
       DispatcherCommand,
       {"journal_dir", "snapshot_every", "worker_timeout_ms", "cache_root", "cache_capacity_bytes",
        "cache_profile_records", "job_retention_ms",
        "check_invariants", "policy_period_ms", "host", "port", "data_roots", "plugin",
        "tls_cert", "tls_key",
        "tls_ca", "insecure", "tokens_file", "admin_clients", "max_jobs_per_client",
        "max_readers_per_client", "max_pipeline_bytes", "max_pipeline_ops", "max_message_bytes",
        "provisioner", "provision_command", "min_workers", "max_workers", "metrics_port",
        "metrics_tls", "log_format",
        "provisioned_worker_flags", "provisioned_worker_log_dir", "worker_price_per_hour",
        "trainer_price_per_hour", "redis_user", "redis_password_file", "new_cluster"}},
      {"worker",
       WorkerCommand,
       {"dispatcher", "worker_id", "standby", "window_bytes", "threads", "heartbeat_interval_ms",
        "register_timeout_ms",
        "checkpoint_dir", "checkpoint_interval_ms", "checkpoints_kept",
        "local_transport", "shm_min_bytes", "host", "port",
        "data_roots", "plugin", "tls_cert", "tls_key", "tls_ca", "insecure",
        "max_message_bytes", "local_to", "take_over_load", "memory_budget_bytes", "metrics_port",
        "metrics_tls", "log_format", "redis_user", "redis_password_file"}},
      // --standby M is renamed --cluster_standby by the command.
      {"cluster",
       ClusterCommand,
       {"workers", "cluster_standby", "dir", "cluster_worker_timeout_ms", "restart", "cache_root",
        "data_roots", "insecure", "host", "port", "max_workers", "redis_user",
        "redis_password_file"},
       {"standby"}},
      {"run",
       RunCommand,
       {"dispatcher", "pipeline", "epochs", "seed", "job_name", "job_owner", "consumer",
        "num_consumers", "num_worker_slots", "digest_out", "position_file", "stall_timeout_ms",
        "rpc_timeout_ms", "max_outstanding_requests", "max_request_bytes", "step_ms",
        "cache_policy", "shared_memory", "compression", "plugin", "tls_cert", "tls_key", "tls_ca",
        "insecure", "token_file", "autoscale", "local_workers", "local_worker_flags", "placement",
        "auto_order", "config"}},
      {"precache",
       PrecacheCommand,
       {"dispatcher", "pipeline", "at_mark", "seed", "num_worker_slots", "timeout_s", "tls_cert",
        "tls_key", "tls_ca", "insecure", "token_file", "config"}},
      {"status", StatusCommand,
       {"dispatcher", "tls_cert", "tls_key", "tls_ca", "insecure", "json", "watch", "config"}},
      {"scale",
       ScaleCommand,
       {"dispatcher", "job", "job_owner", "workers", "local_workers", "reason", "tls_cert",
        "tls_key", "tls_ca", "insecure"}},
      {"journal", JournalCommand, {"journal_dir"}},
      {"chaos",
       ChaosCommand,
       {"scenario", "seed", "workers", "epochs", "dir", "images", "step_ms", "cache", "inject",
        "soak", "minutes", "failpoints", "testonly_break_workers", "transport"}},
  };
  // clang-format on
  return *commands;
}

const Command* FindCommand(absl::string_view name) {
  for (const Command& command : Commands()) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

std::string CommandFlagsHelp(const Command& command) {
  std::vector<absl::string_view> names = command.flags;
  absl::c_sort(names);
  std::string help = absl::StrCat("flags of granary ", command.name, ":\n");
  for (const absl::string_view name : names) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) continue;  // commands_test checks that every listed flag exists
    absl::StrAppend(&help, "  --", name, " (", flag->Help(), "); default: ", flag->DefaultValue(),
                    ";\n");
  }
  absl::StrAppend(&help, "and Abseil's --", absl::StrJoin(SharedFlags(), ", --"), "\n");
  return help;
}

absl::Status CheckCommandFlags(const Command& command, int argc, char** argv) {
  ASSIGN_OR_RETURN(const std::vector<std::string> given, FlagsGiven(argc, argv));
  for (const std::string& flag : given) {
    if (absl::c_linear_search(command.flags, flag) ||
        absl::c_linear_search(command.aliases, flag) ||
        absl::c_linear_search(SharedFlags(), flag)) {
      continue;
    }
    std::vector<std::string> owners;
    for (const Command& other : Commands()) {
      if (absl::c_linear_search(other.flags, flag)) {
        owners.push_back(absl::StrCat("granary ", other.name));
      }
    }
    std::string message = absl::StrCat("--", flag, " is not a flag of granary ", command.name);
    if (!owners.empty()) {
      absl::StrAppend(&message, " (it belongs to ", absl::StrJoin(owners, ", "), ")");
    }
    return absl::InvalidArgumentError(message);
  }
  return absl::OkStatus();
}

}  // namespace granary
