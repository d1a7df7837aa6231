// The subcommands of the `granary` binary. Each takes the arguments after the subcommand name
// (argv[0] is "granary <name>") and returns the process exit code.
#ifndef GRANARY_TOOLS_COMMANDS_H_
#define GRANARY_TOOLS_COMMANDS_H_

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
// granary cluster --workers N [--standby M] [--port P] --dir D [-- extra worker flags]
int ClusterCommand(int argc, char** argv);
// granary run --dispatcher HOST:PORT --pipeline P.json --epochs N [--job_name J] [--seed S]
//   [--consumer C --num_consumers K] [--digest_out F] [--position_file F] [--plugin lib.so]
int RunCommand(int argc, char** argv);
// granary status --dispatcher HOST:PORT
int StatusCommand(int argc, char** argv);
// granary journal dump --journal_dir D
int JournalCommand(int argc, char** argv);
// granary chaos --scenario S --seed N [--workers W] [--epochs E] [--dir D] [--inject P:SPEC]
//   | granary chaos --soak --minutes M | granary chaos --failpoints
int ChaosCommand(int argc, char** argv);

}  // namespace granary

#endif  // GRANARY_TOOLS_COMMANDS_H_
