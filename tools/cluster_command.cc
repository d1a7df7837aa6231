// granary cluster: a local dispatcher and N workers (+ M standbys) as child processes, for
// trying Granary on one machine. Prints every process's address and pid, and stops them all
// on SIGINT/SIGTERM (SIGTERM, then SIGKILL after 5 s).
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/env.h"
#include "common/subprocess.h"
#include "tools/commands.h"
#include "tools/server_flags.h"

ABSL_DECLARE_FLAG(std::string, journal_dir);
ABSL_DECLARE_FLAG(std::string, cache_root);
ABSL_FLAG(int, workers, 2, "Workers to start.");
// `--standby M` on the command line (the worker's --standby is a boolean flag of the same
// binary, so ClusterCommand renames it before parsing).
ABSL_FLAG(int, cluster_standby, 0,
          "Standby workers to start (they take over tasks of lost workers); given as --standby M.");
ABSL_FLAG(std::string, dir, "", "Directory for the journal and the processes' logs.");
ABSL_FLAG(int64_t, cluster_worker_timeout_ms, 2000,
          "The dispatcher's --worker_timeout_ms (a lost worker's tasks move after this).");

namespace granary {
namespace {

struct Member {
  std::string name;
  std::vector<std::string> argv;
  std::unique_ptr<Subprocess> process;
  std::string address;
};

// Starts `m` and reads the address it announces.
bool Launch(Member& m, const std::string& log) {
  m.process = std::make_unique<Subprocess>(m.argv, Subprocess::Stderr::kToFile, log);
  m.address = m.process->ReadListenAddress(std::chrono::seconds(60));
  return !m.address.empty();
}

}  // namespace

int ClusterCommand(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "granary cluster --workers N [--standby M] [--port P] --dir D [-- extra worker flags]");
  // Rename --standby M / --standby=M (before any "--") to --cluster_standby.
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size() && args[i] != "--"; ++i) {
    if (args[i] == "--standby" && i + 1 < args.size()) {
      args[i] = "--cluster_standby=" + args[i + 1];
      args.erase(args.begin() + i + 1);
    } else if (args[i].rfind("--standby=", 0) == 0) {
      args[i] = "--cluster_standby=" + args[i].substr(10);
    }
  }
  std::vector<char*> arg_pointers;
  for (std::string& a : args) arg_pointers.push_back(a.data());
  std::vector<char*> rest =
      absl::ParseCommandLine(static_cast<int>(arg_pointers.size()), arg_pointers.data());
  BlockTerminationSignals();
  const std::string dir = absl::GetFlag(FLAGS_dir);
  if (dir.empty()) {
    std::fprintf(stderr, "granary cluster: --dir is required\n");
    return 2;
  }
  if (!Env::Default()->CreateDirs(dir + "/logs").ok()) {
    std::fprintf(stderr, "granary cluster: cannot create %s/logs\n", dir.c_str());
    return 1;
  }
  const std::string self = SelfExecutablePath();
  const int base_port = absl::GetFlag(FLAGS_port);
  const std::string host = absl::GetFlag(FLAGS_host);

  Member dispatcher{
      "dispatcher",
      {self, "dispatcher", "--journal_dir=" + dir + "/journal",
       "--cache_root=" + (absl::GetFlag(FLAGS_cache_root).empty() ? dir + "/cache"
                                                                  : absl::GetFlag(FLAGS_cache_root)),
       absl::StrCat("--host=", host),
       absl::StrCat("--port=", base_port),
       absl::StrCat("--worker_timeout_ms=", absl::GetFlag(FLAGS_cluster_worker_timeout_ms))}};
  std::vector<Member> members;
  const auto stop_all = [&members, &dispatcher] {
    for (Member& m : members) {
      if (m.process) m.process->Kill(SIGTERM);
    }
    for (Member& m : members) {
      if (m.process && m.process->WaitFor(std::chrono::seconds(5)) < 0) m.process->Kill(SIGKILL);
    }
    if (dispatcher.process) {
      dispatcher.process->Kill(SIGTERM);
      if (dispatcher.process->WaitFor(std::chrono::seconds(5)) < 0) {
        dispatcher.process->Kill(SIGKILL);
      }
    }
  };
  if (!Launch(dispatcher, dir + "/logs/dispatcher.log")) {
    std::fprintf(stderr,
                 "granary cluster: the dispatcher did not start (see %s/logs/dispatcher.log)\n",
                 dir.c_str());
    return 1;
  }
  std::printf("dispatcher %s pid %d\n", dispatcher.address.c_str(), dispatcher.process->pid());
  const int total = absl::GetFlag(FLAGS_workers) + absl::GetFlag(FLAGS_cluster_standby);
  for (int i = 0; i < total; ++i) {
    Member& m = members.emplace_back();
    m.name = absl::StrCat("worker-", i);
    m.argv = {self,
              "worker",
              "--dispatcher=" + dispatcher.address,
              "--worker_id=" + m.name,
              absl::StrCat("--host=", host),
              absl::StrCat("--port=", base_port == 0 ? 0 : base_port + 1 + i)};
    if (i >= absl::GetFlag(FLAGS_workers)) m.argv.push_back("--standby");
    for (size_t r = 1; r < rest.size(); ++r) m.argv.push_back(rest[r]);
    if (!Launch(m, dir + "/logs/" + m.name + ".log")) {
      std::fprintf(stderr, "granary cluster: %s did not start (see %s/logs/%s.log)\n",
                   m.name.c_str(), dir.c_str(), m.name.c_str());
      stop_all();
      return 1;
    }
    // A restart comes back at the same address.
    m.argv[5] = "--port=" + m.address.substr(m.address.rfind(':') + 1);
    std::printf("worker %s %s pid %d%s\n", m.name.c_str(), m.address.c_str(), m.process->pid(),
                i >= absl::GetFlag(FLAGS_workers) ? " standby" : "");
    std::printf("  restart with: %s\n", absl::StrJoin(m.argv, " ").c_str());
  }
  std::printf("cluster ready; logs in %s/logs; Ctrl-C or SIGTERM stops it\n", dir.c_str());
  std::fflush(stdout);
  WaitForTerminationSignal();
  stop_all();
  return 0;
}

}  // namespace granary
