// The one `granary` binary (DESIGN.md §7): dispatches to a subcommand.
#include <cstdio>
#include <cstring>
#include <string>

#include "common/large_allocations.h"
#include "common/failpoint.h"
#include "glog/logging.h"
#include "tools/commands.h"

namespace {

constexpr char kUsage[] = R"(granary: exactly-once ML input pipelines.

usage: granary <command> [flags]

commands:
  local     run a pipeline in-process: granary local --pipeline P.json --epochs N
            [--seed S] [--digest_out F] [--plugin lib.so]
  datagen   write a synthetic ImageNet-style TFRecord dataset of JPEGs:
            granary datagen imagenet --out DIR --images N --files K --size S [--datagen_seed S]
  dispatcher  serve the dispatcher: granary dispatcher --journal_dir D [--port P]
            [--host H] [--snapshot_every N] [--worker_timeout_ms T] [--plugin lib.so]
  worker    run tasks and serve their elements: granary worker --dispatcher H:P
            --worker_id ID [--port P] [--host H] [--standby] [--window_bytes B] [--threads N]
  cluster   a local dispatcher and workers as child processes: granary cluster --workers N
            [--standby M] [--port P] --dir D [--restart] [-- extra worker flags]
  run       read a pipeline's epochs from a Granary service, exactly once: granary run
            --dispatcher H:P --pipeline P.json --epochs N [--job_name J] [--seed S]
            [--consumer C --num_consumers K] [--digest_out F] [--position_file F]
  precache  fill a cache before training: granary precache --dispatcher H:P --pipeline P.json
            [--at_mark NAME] [--seed S]
  status    print a dispatcher's jobs, epochs, tasks, workers: granary status --dispatcher H:P
  journal   print a stopped dispatcher's journal as JSON: granary journal dump --journal_dir D
  chaos     the fault-injection harness: granary chaos --scenario S --seed N [--workers W]
            [--epochs E] [--dir D] [--inject PROCESS:SPEC]; granary chaos --soak --minutes M;
            granary chaos --failpoints

Run `granary <command> --help` for the flags of one command.
)";

}  // namespace

int main(int argc, char** argv) {
  granary::KeepLargeAllocationsInHeap();
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (argc < 2 || std::strcmp(argv[1], "help") == 0 || std::strcmp(argv[1], "--help") == 0) {
    std::fputs(kUsage, stdout);
    return argc < 2 ? 2 : 0;
  }
  if (const absl::Status armed = granary::ConfigureFailpointsFromEnvironment(); !armed.ok()) {
    std::fprintf(stderr, "granary: %s\n", std::string(armed.message()).c_str());
    return 2;
  }
  const std::string name = argv[1];
  const granary::Command* command = granary::FindCommand(name);
  if (command == nullptr) {
    std::fprintf(stderr, "granary: unknown command '%s'\n\n%s", name.c_str(), kUsage);
    return 2;
  }
  // The subcommand sees "granary <command>" as its program name.
  std::string program = std::string("granary ") + name;
  argv[1] = program.data();
  // Abseil's --help lists the flags of the main file (none); --help lists the command's own.
  for (int i = 2; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-help") == 0) {
      std::fputs(granary::CommandFlagsHelp(*command).c_str(), stdout);
      return 0;
    }
  }
  return command->run(argc - 1, argv + 1);
}
