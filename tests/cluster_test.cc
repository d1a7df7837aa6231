// `granary cluster` as a supervisor (issue 13 defect 14): a child that dies is reaped and
// reported; with --restart it comes back with the same id and address; SIGHUP restarts the dead
// ones; SIGTERM stops the cluster and leaves no process behind.
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A started member as the cluster announces it: "<kind> [<name> ]ADDRESS pid P[ ...]".
struct Announced {
  std::string address;
  pid_t pid = -1;
};

bool ProcessExists(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

// The children of `pid`, a single-threaded process (its main thread's, from /proc).
std::set<pid_t> ChildrenOf(pid_t pid) {
  std::set<pid_t> children;
  std::ifstream in(absl::StrCat("/proc/", pid, "/task/", pid, "/children"));
  for (pid_t child; in >> child;) children.insert(child);
  return children;
}

class ClusterTest : public ::testing::Test {
 protected:
  // Starts `granary cluster --workers=2` with `flags` and reads its announcements.
  void StartCluster(const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {GRANARY_BINARY, "cluster", "--workers=2",
                                     "--dir=" + dir_.Join("cluster")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    cluster_ = std::make_unique<Subprocess>(argv, Subprocess::Stderr::kMergeIntoStdout);
    dispatcher_ = ReadAnnouncement("dispatcher");
    worker0_ = ReadAnnouncement("worker worker-0");
    worker1_ = ReadAnnouncement("worker worker-1");
    ReadUntil("cluster ready");
  }

  // Reads the cluster's output up to and including the first line that starts with `prefix`
  // (at most 60 s); returns that line.
  std::string ReadUntil(const std::string& prefix) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string line = cluster_->ReadLine(std::chrono::seconds(60));
      if (line.empty() && cluster_->WaitFor(std::chrono::milliseconds(0)) >= 0) break;
      output_ += line + "\n";
      if (absl::StartsWith(line, prefix)) return line;
    }
    ADD_FAILURE() << "no line starting with '" << prefix << "' in the cluster's output:\n"
                  << output_;
    return "";
  }

  // Reads up to the announcement of `member` ("dispatcher" or "worker worker-N").
  Announced ReadAnnouncement(const std::string& member) {
    const std::string line = ReadUntil(member + " ");
    if (line.empty()) return Announced{};
    const std::vector<std::string> words = absl::StrSplit(line.substr(member.size() + 1), ' ');
    Announced a;
    if (words.size() < 3 || words[1] != "pid" || !absl::SimpleAtoi(words[2], &a.pid)) {
      ADD_FAILURE() << "not an announcement: " << line;
      return a;
    }
    a.address = words[0];
    return a;
  }

  // Stops the cluster with SIGTERM: it exits 0, reports each of `pids` ended, and none is left.
  void StopCluster(const std::set<pid_t>& pids) {
    cluster_->Kill(SIGTERM);
    output_ += cluster_->ReadAll(std::chrono::seconds(60));
    EXPECT_EQ(cluster_->Wait(), 0) << output_;
    for (const pid_t pid : pids) {
      EXPECT_THAT(output_, HasSubstr(absl::StrCat("(pid ", pid, ") ")));
      EXPECT_FALSE(ProcessExists(pid)) << "pid " << pid << " outlived the cluster";
    }
  }

  testing::ScopedTempDir dir_;
  std::unique_ptr<Subprocess> cluster_;
  Announced dispatcher_, worker0_, worker1_;
  std::string output_;
};

TEST_F(ClusterTest, RestartsAKilledWorkerAndDispatcherAtTheirAddresses) {
  StartCluster({"--restart"});
  const Announced dispatcher = dispatcher_, worker0 = worker0_, worker1 = worker1_;
  EXPECT_EQ(ChildrenOf(cluster_->pid()),
            (std::set<pid_t>{dispatcher.pid, worker0.pid, worker1.pid}));

  ASSERT_EQ(::kill(worker1.pid, SIGKILL), 0);
  EXPECT_EQ(ReadUntil("worker-1 (pid"),
            absl::StrCat("worker-1 (pid ", worker1.pid, ") was killed by signal 9 (SIGKILL)"));
  EXPECT_FALSE(ProcessExists(worker1.pid)) << "reported but not reaped (a zombie)";
  EXPECT_THAT(ReadUntil("worker-1: "), HasSubstr("restarting in 0.25 s"));
  const Announced restarted = ReadAnnouncement("worker worker-1");
  EXPECT_EQ(restarted.address, worker1.address);
  EXPECT_NE(restarted.pid, worker1.pid);
  EXPECT_EQ(ChildrenOf(cluster_->pid()),
            (std::set<pid_t>{dispatcher.pid, worker0.pid, restarted.pid}));

  ASSERT_EQ(::kill(dispatcher.pid, SIGKILL), 0);
  EXPECT_THAT(ReadUntil("dispatcher (pid"), HasSubstr("was killed by signal 9"));
  const Announced dispatcher2 = ReadAnnouncement("dispatcher");
  EXPECT_EQ(dispatcher2.address, dispatcher.address);

  StopCluster({dispatcher2.pid, worker0.pid, restarted.pid});
}

TEST_F(ClusterTest, WithoutRestartADeathIsReportedAndSighupRestarts) {
  StartCluster({});
  const Announced worker0 = worker0_;
  EXPECT_EQ(
      ReadUntil("a process that dies"),
      absl::StrCat("a process that dies is reported; kill -HUP ", cluster_->pid(), " restarts it"));

  ASSERT_EQ(::kill(worker0.pid, SIGKILL), 0);
  EXPECT_EQ(ReadUntil("worker-0 (pid"),
            absl::StrCat("worker-0 (pid ", worker0.pid, ") was killed by signal 9 (SIGKILL)"));
  EXPECT_FALSE(ProcessExists(worker0.pid)) << "reported but not reaped (a zombie)";
  EXPECT_THAT(ReadUntil("worker-0 is not restarted"),
              HasSubstr(absl::StrCat("kill -HUP ", cluster_->pid())));

  ASSERT_EQ(::kill(cluster_->pid(), SIGHUP), 0);
  const Announced restarted = ReadAnnouncement("worker worker-0");
  EXPECT_EQ(restarted.address, worker0.address);
  const std::set<pid_t> children = ChildrenOf(cluster_->pid());
  EXPECT_EQ(children.size(), 3u);
  EXPECT_TRUE(children.count(restarted.pid)) << "the restarted worker is the cluster's child";
  StopCluster(children);
}

// Issue 30: the cluster writes a client configuration file beside its certificates, and the
// client commands reach the (TLS) cluster with --config alone; a bad file is an error naming the
// file and the field.
TEST_F(ClusterTest, ClientCommandsReachTheClusterWithItsConfigFileAlone) {
  StartCluster({});
  const std::string announced = "client config: ";
  const size_t at = output_.find(announced);
  ASSERT_NE(at, std::string::npos) << output_;
  const size_t start = at + announced.size();
  const std::string config = output_.substr(start, output_.find(' ', start) - start);
  EXPECT_EQ(config, dir_.Join("cluster") + "/client.json");

  const auto granary = [](const std::vector<std::string>& args, int expected_exit) {
    std::vector<std::string> argv = {GRANARY_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    Subprocess process(argv, Subprocess::Stderr::kMergeIntoStdout);
    const std::string output = process.ReadAll(std::chrono::seconds(60));
    EXPECT_EQ(process.Wait(), expected_exit) << absl::StrJoin(args, " ") << ":\n" << output;
    return output;
  };
  EXPECT_THAT(granary({"status", "--config=" + config}, 0),
              AllOf(HasSubstr("worker-0"), HasSubstr("worker-1")));
  const std::string pipeline = dir_.Join("pipeline.json");
  ASSERT_TRUE(WriteStringToFile(Env::Default(), pipeline,
                                R"({"source": {"type": "range", "params": {"stop": 100}},
                                    "ops": [{"op": "batch", "params": {"batch_size": 10}}]})",
                                false)
                  .ok());
  const std::string digests = dir_.Join("digests.jsonl");
  granary({"run", "--config=" + config, "--pipeline=" + pipeline, "--epochs=1",
           "--digest_out=" + digests},
          0);
  const absl::StatusOr<std::string> digest = ReadFileToString(Env::Default(), digests);
  ASSERT_TRUE(digest.ok()) << digest.status();
  EXPECT_THAT(*digest, HasSubstr("\"elements\":100"));

  const std::string unknown_field = dir_.Join("unknown_field.json");
  ASSERT_TRUE(WriteStringToFile(Env::Default(), unknown_field,
                                R"({"dispatcher": "127.0.0.1:1", "tls_cs": "ca.crt"})", false)
                  .ok());
  EXPECT_THAT(granary({"run", "--config=" + unknown_field, "--pipeline=" + pipeline}, 1),
              AllOf(HasSubstr("client config " + unknown_field), HasSubstr("tls_cs")));
  const std::string missing_file = dir_.Join("missing_file.json");
  ASSERT_TRUE(WriteStringToFile(Env::Default(), missing_file,
                                R"({"dispatcher": "127.0.0.1:1", "tls_ca": "nowhere/ca.crt"})",
                                false)
                  .ok());
  EXPECT_THAT(granary({"status", "--config=" + missing_file}, 2),
              AllOf(HasSubstr("client config " + missing_file + ": field tls_ca"),
                    HasSubstr("nowhere/ca.crt")));
  StopCluster({dispatcher_.pid, worker0_.pid, worker1_.pid});
}

}  // namespace
}  // namespace granary
