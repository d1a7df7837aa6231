// The subcommands of the `granary` binary. Each takes the arguments after the subcommand name
// (argv[0] is "granary <name>") and returns the process exit code.
//
// Every command's flags are Abseil flags in one global namespace; a command accepts only its own
// (command_flags.h: those defined in its tools/<name>_command.cc, the flag groups Commands()
// names for it, and those it borrows with GRANARY_COMMAND_BORROWS_FLAG). It parses its command
// line with ParseCommandFlags, which refuses any other.
#ifndef GRANARY_TOOLS_COMMANDS_H_
#define GRANARY_TOOLS_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
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
  // Shared files all flags of which it accepts besides its own, e.g. "tools/tls_flags.cc".
  std::vector<absl::string_view> flag_groups = {};
};

// Every subcommand.
const std::vector<Command>& Commands();
// The subcommand called `name`, or null.
const Command* FindCommand(absl::string_view name);

// The flags `command` accepts besides Abseil's own (command_flags.h), sorted by name.
std::vector<absl::CommandLineFlag*> CommandFlags(const Command& command);

// What `granary <command> --help` prints: CommandFlags(command), each as
// "  --name (help); default: value;" on its own line, then a note on Abseil's flags.
std::string CommandFlagsHelp(const Command& command);

// OK if every flag the last absl::ParseCommandLine set (on the command line or in a --flagfile)
// is one `command` accepts. Otherwise InvalidArgument naming the other flag first by name and
// the commands it belongs to, if any, e.g. "--journal_dir is not a flag of granary run (it
// belongs to granary dispatcher, granary journal)".
absl::Status CheckFlagsGiven(const Command& command);

// What a command calls instead of absl::ParseCommandLine, with its own argc and argv (argv[0]
// "granary <name>"): Abseil parses them (exiting 1 on an unknown flag or a bad value, and
// serving --helpfull, --flagfile and the like), then an error of CheckFlagsGiven is printed as
// "granary <name>: <message>" and the process exits 2. Returns argv[0] and the positional
// arguments, as absl::ParseCommandLine does.
std::vector<char*> ParseCommandFlags(int argc, char** argv);

}  // namespace granary

#endif  // GRANARY_TOOLS_COMMANDS_H_
