// The subcommands of the `granary` binary. Each takes the arguments after the subcommand name
// (argv[0] is "granary <name>") and returns the process exit code.
//
// Every command's flags are Abseil flags in one global namespace, so Commands() also lists the
// flags each command accepts, and granary_main refuses any other (CheckCommandFlags) before the
// command parses its command line. A new flag must be added to the list of each command that
// reads it (commands_test checks that every listed flag exists and every flag is listed).
#ifndef GRANARY_TOOLS_COMMANDS_H_
#define GRANARY_TOOLS_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace granary {

// granary local --pipeline P.json --epochs N [--seed S] [--digest_out F] [--plugin lib.so]
int LocalCommand(int argc, char** argv);
// granary datagen imagenet --out DIR --images N --files K --size S [--seed S]
int DatagenCommand(int argc, char** argv);
// granary dispatcher --journal_dir D [--port P] [--host H] [--snapshot_every N]
//   [--worker_timeout_ms T] [--plugin lib.so]
int DispatcherCommand(int argc, char** argv);
// granary worker --dispatcher HOST:PORT --worker_id ID [--port P] [--host H] [--standby]
//   [--window_bytes B] [--threads N] [--plugin lib.so]
int WorkerCommand(int argc, char** argv);
// granary cluster --workers N [--standby M] [--port P] --dir D [--restart] [-- extra worker flags]
int ClusterCommand(int argc, char** argv);
// granary run --dispatcher HOST:PORT --pipeline P.json --epochs N [--job_name J] [--seed S]
//   [--consumer C --num_consumers K] [--digest_out F] [--position_file F] [--plugin lib.so]
int PrecacheCommand(int argc, char** argv);
int RunCommand(int argc, char** argv);
// granary status --dispatcher HOST:PORT
int StatusCommand(int argc, char** argv);
// granary scale: sets a job's tasks per consumer, mid-epoch too.
int ScaleCommand(int argc, char** argv);
// granary journal dump --journal_dir D
int JournalCommand(int argc, char** argv);
// granary chaos --scenario S --seed N [--workers W] [--epochs E] [--dir D] [--inject P:SPEC]
//   | granary chaos --soak --minutes M | granary chaos --failpoints
int ChaosCommand(int argc, char** argv);

struct Command {
  absl::string_view name;
  int (*run)(int argc, char** argv);
  // The flags it accepts besides SharedFlags() (command_flags.h): those its code reads.
  std::vector<absl::string_view> flags;
  // Other names it accepts, which it renames to one of `flags` before parsing.
  std::vector<absl::string_view> aliases = {};
};

// Every subcommand.
const std::vector<Command>& Commands();
// The subcommand called `name`, or null.
const Command* FindCommand(absl::string_view name);

// What `granary <command> --help` prints: the flags `command` accepts, sorted, each as
// "  --name (help); default: value;" on its own lines, then a note on the shared flags.
std::string CommandFlagsHelp(const Command& command);

// OK if every flag argv[1..argc) gives (FlagsGiven in command_flags.h) is one `command` accepts.
// Errors: InvalidArgument naming the first other flag and the commands it belongs to, if any,
// e.g. "--journal_dir is not a flag of granary run (it belongs to granary dispatcher, granary
// journal)"; FlagsGiven's errors.
absl::Status CheckCommandFlags(const Command& command, int argc, char** argv);

}  // namespace granary

#endif  // GRANARY_TOOLS_COMMANDS_H_
