// `granary cluster` as a supervisor (issue 13 defect 14): a child that dies is reaped and
// reported; with --restart it comes back with the same id and address; SIGHUP restarts the dead
// ones; SIGTERM stops the cluster and leaves no process behind. With --replicas 3 (issue 32) it
// runs a local etcd and three dispatcher replicas, and serves through the leader's death.
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
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "proto/dispatcher.grpc.pb.h"
#include "security/transport_security.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

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
    LaunchCluster(flags);
    dispatcher_ = ReadAnnouncement("dispatcher");
    ReadWorkersAndReady();
  }

  // Starts `granary cluster --workers=2 --replicas=3` and reads its announcements.
  void StartReplicatedCluster() {
    LaunchCluster({"--replicas=3"});
    for (int i = 0; i < 3; ++i) etcd_.push_back(ReadAnnouncement(absl::StrCat("etcd etcd-", i)));
    for (int i = 0; i < 3; ++i) {
      replicas_.push_back(ReadAnnouncement(absl::StrCat("dispatcher replica-", i)));
    }
    ReadWorkersAndReady();
  }

  void LaunchCluster(const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {GRANARY_BINARY, "cluster", "--workers=2",
                                     "--dir=" + dir_.Join("cluster")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    cluster_ = std::make_unique<Subprocess>(argv, Subprocess::Stderr::kMergeIntoStdout);
  }

  void ReadWorkersAndReady() {
    worker0_ = ReadAnnouncement("worker worker-0");
    worker1_ = ReadAnnouncement("worker worker-1");
    ReadUntil("cluster ready");
  }

  // The client configuration file the cluster announced.
  std::string ClientConfig() {
    const std::string announced = "client config: ";
    const size_t at = output_.find(announced);
    if (at == std::string::npos) {
      ADD_FAILURE() << "no client config announced:\n" << output_;
      return "";
    }
    const size_t start = at + announced.size();
    return output_.substr(start, output_.find(' ', start) - start);
  }

  // Runs `granary ARGS`; expects it to exit with `expected_exit`. Returns its output.
  static std::string Granary(const std::vector<std::string>& args, int expected_exit) {
    std::vector<std::string> argv = {GRANARY_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    Subprocess process(argv, Subprocess::Stderr::kMergeIntoStdout);
    const std::string output = process.ReadAll(std::chrono::seconds(120));
    EXPECT_EQ(process.Wait(), expected_exit) << absl::StrJoin(args, " ") << ":\n" << output;
    return output;
  }

  // Writes a pipeline of the numbers 0..99 in batches of 10; returns its path.
  std::string WritePipeline() {
    const std::string pipeline = dir_.Join("pipeline.json");
    EXPECT_TRUE(WriteStringToFile(Env::Default(), pipeline,
                                  R"({"source": {"type": "range", "params": {"stop": 100}},
                                      "ops": [{"op": "batch", "params": {"batch_size": 10}}]})",
                                  false)
                    .ok());
    return pipeline;
  }

  // Reads one epoch of `pipeline` through the cluster with `config`; the digest file written.
  std::string ReadEpoch(const std::string& config, const std::string& pipeline,
                        const std::string& name) {
    const std::string digests = dir_.Join(name + ".jsonl");
    Granary({"run", "--config=" + config, "--pipeline=" + pipeline, "--epochs=1",
             "--digest_out=" + digests},
            0);
    const absl::StatusOr<std::string> digest = ReadFileToString(Env::Default(), digests);
    EXPECT_TRUE(digest.ok()) << digest.status();
    return digest.value_or("");
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
  // Of a replicated cluster.
  std::vector<Announced> etcd_, replicas_;
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
  const std::string config = ClientConfig();
  EXPECT_EQ(config, dir_.Join("cluster") + "/client.json");

  EXPECT_THAT(Granary({"status", "--config=" + config}, 0),
              AllOf(HasSubstr("worker-0"), HasSubstr("worker-1")));
  const std::string pipeline = WritePipeline();
  EXPECT_THAT(ReadEpoch(config, pipeline, "digests"), HasSubstr("\"elements\":100"));

  const std::string unknown_field = dir_.Join("unknown_field.json");
  ASSERT_TRUE(WriteStringToFile(Env::Default(), unknown_field,
                                R"({"dispatcher": "127.0.0.1:1", "tls_cs": "ca.crt"})", false)
                  .ok());
  EXPECT_THAT(Granary({"run", "--config=" + unknown_field, "--pipeline=" + pipeline}, 1),
              AllOf(HasSubstr("client config " + unknown_field), HasSubstr("tls_cs")));
  const std::string missing_file = dir_.Join("missing_file.json");
  ASSERT_TRUE(WriteStringToFile(Env::Default(), missing_file,
                                R"({"dispatcher": "127.0.0.1:1", "tls_ca": "nowhere/ca.crt"})",
                                false)
                  .ok());
  EXPECT_THAT(Granary({"status", "--config=" + missing_file}, 2),
              AllOf(HasSubstr("client config " + missing_file + ": field tls_ca"),
                    HasSubstr("nowhere/ca.crt")));
  StopCluster({dispatcher_.pid, worker0_.pid, worker1_.pid});
}

// Issue 32: `granary cluster --replicas 3` runs a local etcd of 3 members and 3 dispatcher
// replicas over it (TLS throughout); the written client config names every replica. Reading
// works; `granary status` shows which replica leads and that the followers applied what it did
// (a lag of 0 records); once the leading replica is SIGKILLed,
// another leads, reading still works and status shows the dead one not serving; stopping the
// cluster leaves none of its processes running.
TEST_F(ClusterTest, ReplicatedClusterServesThroughTheLeadingReplicasDeath) {
  StartReplicatedCluster();
  ASSERT_EQ(replicas_.size(), 3u);
  std::set<pid_t> pids = {worker0_.pid, worker1_.pid};
  std::vector<std::string> addresses;
  for (const Announced& member : etcd_) pids.insert(member.pid);
  for (const Announced& replica : replicas_) {
    pids.insert(replica.pid);
    addresses.push_back(replica.address);
  }
  EXPECT_EQ(ChildrenOf(cluster_->pid()), pids);
  const std::string config = ClientConfig();
  const absl::StatusOr<std::string> config_text = ReadFileToString(Env::Default(), config);
  ASSERT_TRUE(config_text.ok()) << config_text.status();
  EXPECT_THAT(*config_text, HasSubstr(absl::StrJoin(addresses, ",")));
  const std::string pipeline = WritePipeline();
  EXPECT_THAT(ReadEpoch(config, pipeline, "before"), HasSubstr("\"elements\":100"));

  // The leader: the replica whose GetStatus answers (the others refuse, naming it).
  TransportSecurity client;
  client.ca_file = dir_.Join("cluster/tls/ca.crt");
  client.cert_file = dir_.Join("cluster/tls/client.crt");
  client.key_file = dir_.Join("cluster/tls/client.key");
  const absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentialsFor(client);
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  int leader = -1;
  for (int i = 0; i < 3; ++i) {
    auto stub = Dispatcher::NewStub(grpc::CreateChannel(addresses[i], *credentials));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    GetStatusRequest request;
    request.set_summary(true);
    GetStatusResponse response;
    const grpc::Status status = stub->GetStatus(&context, request, &response);
    if (status.ok()) {
      EXPECT_EQ(leader, -1) << "two replicas answer GetStatus";
      leader = i;
    } else {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
    }
  }
  ASSERT_NE(leader, -1) << "no replica answers GetStatus";
  const std::string leading = addresses[leader];
  // Each replica says the seq of the last record it applied; the followers, hot standbys, catch
  // up with the leader: the same seq, a lag of 0 records.
  const std::string leader_line = "  " + leading + "  leader, applied seq ";
  std::string status;
  uint64_t applied = 0;
  const auto caught_up = [&] {
    const size_t at = status.find(leader_line);
    if (at == std::string::npos) return false;
    const size_t from = at + leader_line.size();
    if (!absl::SimpleAtoi(status.substr(from, status.find(',', from) - from), &applied)) {
      return false;
    }
    for (int i = 0; i < 3; ++i) {
      const std::string line =
          i == leader ? absl::StrCat(leader_line, applied, ", lag 0 records\n")
                      : absl::StrCat("  ", addresses[i], "  follower (leader ", leading,
                                     "), applied seq ", applied, ", lag 0 records\n");
      if (status.find(line) == std::string::npos) return false;
    }
    return true;
  };
  for (const absl::Time until = absl::Now() + absl::Seconds(30);
       !caught_up() && absl::Now() < until;) {
    status = Granary({"status", "--config=" + config}, 0);
  }
  EXPECT_TRUE(caught_up()) << status;
  EXPECT_THAT(status, HasSubstr("replicas (3):\n"));
  EXPECT_GT(applied, 0u) << status;
  const std::string json = Granary({"status", "--config=" + config, "--json"}, 0);
  EXPECT_THAT(json, AllOf(HasSubstr(R"({"replicas":[{)"), HasSubstr(R"("role":"leader")"),
                          HasSubstr(R"("role":"follower")"),
                          HasSubstr(absl::StrCat(R"("leader":")", leading, R"(")")),
                          HasSubstr(R"("applied_seq":)"), HasSubstr(R"("lag_records":)"),
                          HasSubstr(R"("live_workers":)")));

  const Announced killed = replicas_[leader];
  ASSERT_EQ(::kill(killed.pid, SIGKILL), 0);
  EXPECT_EQ(
      ReadUntil(absl::StrCat("replica-", leader, " (pid")),
      absl::StrCat("replica-", leader, " (pid ", killed.pid, ") was killed by signal 9 (SIGKILL)"));
  pids.erase(killed.pid);
  EXPECT_THAT(ReadEpoch(config, pipeline, "after"), HasSubstr("\"elements\":100"));
  const std::string after = Granary({"status", "--config=" + config}, 0);
  EXPECT_THAT(after, HasSubstr("  " + leading + "  not serving: "));
  EXPECT_THAT(after, Not(HasSubstr(leader_line)));
  EXPECT_THAT(after, HasSubstr("  leader, applied seq "));

  StopCluster(pids);
  EXPECT_FALSE(ProcessExists(killed.pid));
}

TEST_F(ClusterTest, BadReplicaFlagsAreRefused) {
  EXPECT_THAT(Granary({"cluster", "--replicas=0", "--dir=" + dir_.Join("zero")}, 1),
              HasSubstr("--replicas must be at least 1, is 0"));
  EXPECT_THAT(Granary({"cluster", "--replicas=3", "--workers=1", "--max_workers=2", "--insecure",
                       "--dir=" + dir_.Join("provisioned")},
                      1),
              HasSubstr("--max_workers is not supported with --replicas yet"));
}

}  // namespace
}  // namespace granary
