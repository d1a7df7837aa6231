// What operators see of a running cluster of real processes (issue 19): the dispatcher's and
// workers' /metrics parse as Prometheus' text format and move as the run does (elements served
// equal the rows the trainer got), the health probes answer, /status.json and `granary status
// --json` name the running job, headless Chromium renders the live status page (its DOM shows
// the job and its tasks; a screenshot is kept under the build's test_outputs/), and
// --log_format=json logs one object per line naming the component, worker, job and task; with
// --metrics_tls the endpoint serves HTTPS with the servers' certificates, and idle connections
// do not delay its probes.
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "obs/http_get.h"
#include "proto/dispatcher.pb.h"
#include "testing/exposition_parser.h"
#include "testing/http_test_util.h"
#include "testing/scoped_temp_dir.h"
#include "testing/test_certificates.h"
#include "tests/local_cluster.h"
#include "tests/run_outputs.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// 20 splits of 1000 values, shuffled: 20000 elements per epoch, no batching (an element is a
// row).
constexpr char kPipeline[] = R"({
  "source": {"type": "range",
             "params": {"stop": 20000, "elements_per_split": 1000, "shuffle_splits": true}},
  "ops": [{"op": "shuffle", "params": {"buffer_size": 64}}]})";
constexpr int64_t kRowsPerEpoch = 20000;

absl::StatusOr<Exposition> Scrape(int port) {
  absl::StatusOr<HttpGetResult> page = HttpGet("127.0.0.1", port, "/metrics");
  if (!page.ok()) return page.status();
  if (page->status != 200) {
    return absl::InternalError(absl::StrCat("/metrics answered ", page->status));
  }
  return ParseExposition(page->body);
}

// GET https://127.0.0.1:port/path, the server's certificate verified against `ca_file` (and
// for 127.0.0.1), with OpenSSL: what Prometheus or a probe with scheme HTTPS does. The whole
// answer (status line, headers, body); an error names what failed.
absl::StatusOr<std::string> HttpsGet(int port, const std::string& path,
                                     const std::string& ca_file) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> context(SSL_CTX_new(TLS_client_method()),
                                                            &SSL_CTX_free);
  if (SSL_CTX_load_verify_locations(context.get(), ca_file.c_str(), nullptr) != 1) {
    return absl::InternalError("cannot load " + ca_file);
  }
  SSL_CTX_set_verify(context.get(), SSL_VERIFY_PEER, nullptr);
  const int s = testing::ConnectLoopback(port);
  if (s < 0) return absl::UnavailableError(absl::StrCat("cannot connect to port ", port));
  timeval timeout{10, 0};
  ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(context.get()), &SSL_free);
  SSL_set_fd(ssl.get(), s);
  X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), "127.0.0.1");
  std::string answer;
  if (SSL_connect(ssl.get()) != 1) {
    ::close(s);
    return absl::UnavailableError(absl::StrCat("TLS handshake with port ", port, " failed: ",
                                               X509_verify_cert_error_string(
                                                   SSL_get_verify_result(ssl.get()))));
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  SSL_write(ssl.get(), request.data(), static_cast<int>(request.size()));
  char buffer[16384];
  for (int n; (n = SSL_read(ssl.get(), buffer, sizeof(buffer))) > 0;) answer.append(buffer, n);
  ::close(s);
  return answer;
}

class OpsProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pipeline_ = dir_.Join("pipeline.json");
    ASSERT_TRUE(WriteStringToFile(Env::Default(), pipeline_, kPipeline, false).ok());
  }

  testing::LocalClusterOptions Options(std::vector<std::string> extra_worker_flags = {}) {
    testing::LocalClusterOptions options;
    options.workers = 2;
    options.dispatcher_flags = {"--metrics_port=0"};
    options.worker_flags = {"--metrics_port=0"};
    options.worker_flags.insert(options.worker_flags.end(), extra_worker_flags.begin(),
                                extra_worker_flags.end());
    return options;
  }

  // `granary run` of the pipeline for `epochs`, slowed by `step_ms` per element.
  std::unique_ptr<Subprocess> StartRun(const testing::LocalCluster& cluster, int epochs,
                                       int step_ms, const std::string& digest,
                                       std::vector<std::string> extra_flags = {}) {
    std::vector<std::string> argv = {GRANARY_BINARY,
                                     "run",
                                     "--insecure",
                                     "--dispatcher=" + cluster.dispatcher_address(),
                                     "--pipeline=" + pipeline_,
                                     absl::StrCat("--epochs=", epochs),
                                     "--seed=5",
                                     "--job_name=ops-test-job",
                                     absl::StrCat("--step_ms=", step_ms),
                                     "--digest_out=" + digest};
    argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
    return std::make_unique<Subprocess>(argv, Subprocess::Stderr::kMergeIntoStdout);
  }

  testing::ScopedTempDir dir_;
  std::string pipeline_;
};

TEST_F(OpsProcessTest, MetricsParseAndMoveWithTheRun) {
  testing::LocalCluster cluster(dir_.Join("cluster"), Options());
  ASSERT_TRUE(cluster.ok());
  const int dispatcher_port = cluster.dispatcher_metrics_port();
  ASSERT_GT(dispatcher_port, 0);
  for (const char* path : {"/healthz", "/readyz"}) {
    absl::StatusOr<HttpGetResult> probe = HttpGet("127.0.0.1", dispatcher_port, path);
    ASSERT_TRUE(probe.ok()) << probe.status();
    EXPECT_EQ(probe->status, 200) << path;
    probe = HttpGet("127.0.0.1", cluster.worker_metrics_port(0), path);
    ASSERT_TRUE(probe.ok()) << probe.status();
    EXPECT_EQ(probe->status, 200) << "worker " << path;
  }

  const std::string digest = dir_.Join("run.digest");
  std::unique_ptr<Subprocess> run = StartRun(cluster, 2, 0, digest);
  // Scraped during the run: both parse, and elements are being served before the run ends.
  bool seen_mid_run = false;
  for (int i = 0; i < 200 && !seen_mid_run && run->running(); ++i) {
    absl::StatusOr<Exposition> dispatcher = Scrape(dispatcher_port);
    ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
    for (int w = 0; w < 2; ++w) {
      absl::StatusOr<Exposition> worker = Scrape(cluster.worker_metrics_port(w));
      ASSERT_TRUE(worker.ok()) << "worker " << w << ": " << worker.status();
      if (worker->Sum("granary_worker_elements_served_total") > 0) seen_mid_run = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string output = run->ReadAll();
  ASSERT_EQ(run->Wait(), 0) << output;
  EXPECT_TRUE(seen_mid_run) << "no scrape saw elements served while the run went on";
  const std::map<int64_t, DigestLine> digests = testing::ReadDigests(digest);
  ASSERT_EQ(digests.size(), 2u);
  int64_t rows = 0;
  for (const auto& [epoch, line] : digests) rows += line.rows;
  ASSERT_EQ(rows, 2 * kRowsPerEpoch);

  // Elements served by the workers are the rows the trainer got (no worker died: no resends
  // needed, none recomputed).
  double served = 0, resent = 0, recomputed = 0, bytes = 0;
  for (int w = 0; w < 2; ++w) {
    absl::StatusOr<Exposition> worker = Scrape(cluster.worker_metrics_port(w));
    ASSERT_TRUE(worker.ok()) << worker.status();
    served += worker->Sum("granary_worker_elements_served_total");
    resent += worker->Sum("granary_worker_elements_resent_total");
    recomputed += worker->Sum("granary_worker_elements_recomputed_total");
    bytes += worker->Sum("granary_worker_bytes_served_total");
    EXPECT_GT(worker->Sum("process_resident_memory_bytes"), 0);
    EXPECT_GT(worker->Sum("process_cpu_seconds_total"), 0);
    EXPECT_EQ(worker->types.at("granary_worker_elements_served_total"), "counter");
  }
  EXPECT_EQ(served, rows);
  EXPECT_EQ(recomputed, 0);
  EXPECT_GT(bytes, rows);  // every element has a payload
  // A resend answers a lost reply; on loopback with no fault injected there are none.
  EXPECT_EQ(resent, 0);

  // The dispatcher's view: the trainer's heartbeats report the same rows (the last heartbeat
  // may come a moment after the run's end), both epochs started computing, the journal
  // committed its records, both workers are live.
  absl::StatusOr<Exposition> dispatcher;
  for (int i = 0; i < 100; ++i) {
    dispatcher = Scrape(dispatcher_port);
    ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
    if (dispatcher->Sum("granary_job_elements_delivered_total") >= rows) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(dispatcher->Sum("granary_job_elements_delivered_total"), rows);
  EXPECT_EQ(dispatcher->Sum("granary_dispatcher_epochs_started_total", {{"cache", "compute"}}), 2);
  EXPECT_EQ(dispatcher->Sum("granary_dispatcher_workers", {{"state", "live"}}), 2);
  EXPECT_GT(dispatcher->Sum("granary_journal_appends_total"), 0);
  EXPECT_EQ(dispatcher->Sum("granary_journal_group_size_count"),
            dispatcher->Sum("granary_journal_commit_seconds_count"));
  EXPECT_GT(dispatcher->Sum("granary_journal_commit_seconds_count"), 0);
  EXPECT_EQ(dispatcher->types.at("granary_journal_commit_seconds"), "histogram");
  EXPECT_GT(dispatcher->Sum("granary_journal_applied_seq"), 0);
  EXPECT_GE(dispatcher->Sum("granary_job_trainer_wait_seconds_total"), 0);
  EXPECT_TRUE(dispatcher->Has("granary_job_trainer_wait_seconds_per_element"));
}

TEST_F(OpsProcessTest, AKilledWorkersTasksAreCountedAsMovedAndRestored) {
  testing::LocalCluster cluster(dir_.Join("cluster"), Options());
  ASSERT_TRUE(cluster.ok());
  const std::string digest = dir_.Join("run.digest");
  // The trainer reads 1 element per ms, and asks for 4 KB per call (a queue of at most 8 KB,
  // ~1000 elements, plus one 4 KB answer per call in flight): the client can run at most ~3000
  // elements ahead of the trainer, so worker 0 cannot have served the whole of its ~10000-element
  // task before the kill below however slow the scrapes are, and its task's reader still needs
  // elements from worker 1. (With 64 MB calls the client could take the whole task at once,
  // and worker 1 then never restored it: the test's old flake.)
  std::unique_ptr<Subprocess> run =
      StartRun(cluster, 1, 1, digest, {"--max_request_bytes=4096"});
  // Once worker 0 has served part of its task, kill it for good: its task moves.
  for (int i = 0; i < 300; ++i) {
    absl::StatusOr<Exposition> worker = Scrape(cluster.worker_metrics_port(0));
    ASSERT_TRUE(worker.ok()) << worker.status();
    if (worker->Sum("granary_worker_elements_served_total") > 500) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  cluster.KillWorker(0);
  const std::string output = run->ReadAll(std::chrono::seconds(120));
  ASSERT_EQ(run->Wait(), 0) << output;
  absl::StatusOr<Exposition> dispatcher = Scrape(cluster.dispatcher_metrics_port());
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
  EXPECT_GE(dispatcher->Sum("granary_dispatcher_tasks_moved_total"), 1);
  EXPECT_EQ(dispatcher->Sum("granary_dispatcher_workers", {{"state", "lost"}}), 1);
  absl::StatusOr<Exposition> survivor = Scrape(cluster.worker_metrics_port(1));
  ASSERT_TRUE(survivor.ok()) << survivor.status();
  // Worker 1 took over the partly read task: restored from its start (no checkpoints here),
  // recomputing what the trainer already had.
  EXPECT_EQ(survivor->Sum("granary_worker_restores_total", {{"source", "start"}}), 1);
  EXPECT_GT(survivor->Sum("granary_worker_elements_recomputed_total"), 0);
  const std::map<int64_t, DigestLine> digests = testing::ReadDigests(digest);
  ASSERT_EQ(digests.size(), 1u);
  EXPECT_EQ(digests.begin()->second.rows, kRowsPerEpoch);
}

// The samples of `exposition` labelled with job `job_id`.
int JobSeries(const Exposition& exposition, int64_t job_id) {
  int series = 0;
  for (const ExpositionSample& sample : exposition.samples) {
    const auto job = sample.labels.find("job");
    if (job != sample.labels.end() && job->second == absl::StrCat(job_id)) ++series;
  }
  return series;
}

// The id of the job named `name` in the dispatcher's state (-1 if none).
int64_t JobId(testing::LocalCluster& cluster, const std::string& name) {
  GetStatusResponse status;
  const grpc::Status rpc = cluster.dispatcher().GetStatus(testing::RpcContext().get(), {}, &status);
  EXPECT_TRUE(rpc.ok()) << rpc.error_message();
  for (const JobState& job : status.state().jobs()) {
    if (job.name() == name) return job.job_id();
  }
  return -1;
}

// /metrics once carried the series of every job ever run (until it was retired, 10 minutes
// idle): a finished job's leave it, and a running job's stay.
TEST_F(OpsProcessTest, FinishedJobsSeriesLeaveTheMetrics) {
  testing::LocalCluster cluster(dir_.Join("cluster"), Options());
  ASSERT_TRUE(cluster.ok());
  std::vector<int64_t> finished;
  for (int i = 0; i < 3; ++i) {
    const std::string name = absl::StrCat("finished-", i);
    std::unique_ptr<Subprocess> run =
        StartRun(cluster, 1, 0, dir_.Join(name + ".digest"), {"--job_name=" + name});
    const std::string output = run->ReadAll(std::chrono::seconds(60));
    ASSERT_EQ(run->Wait(), 0) << output;
    finished.push_back(JobId(cluster, name));
    ASSERT_GE(finished.back(), 0) << name;
  }
  // A job still running (1 ms per element: about 20 s).
  std::unique_ptr<Subprocess> running =
      StartRun(cluster, 1, 1, dir_.Join("running.digest"), {"--job_name=running"});
  int64_t running_id = -1;
  absl::StatusOr<Exposition> metrics;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  for (;;) {
    if (running_id < 0) running_id = JobId(cluster, "running");
    metrics = Scrape(cluster.dispatcher_metrics_port());
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    int left = 0;
    for (int64_t id : finished) left += JobSeries(*metrics, id);
    if (left == 0 && running_id >= 0 && JobSeries(*metrics, running_id) > 0) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << left << " series of the finished jobs are still exported (or the running job "
        << running_id << " has none)";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(running->running()) << "the running job ended before its finished peers' series";
  EXPECT_GT(metrics->Sum("granary_job_epochs_started_total", {{"job", absl::StrCat(running_id)}}),
            0);
  const std::string output = running->ReadAll(std::chrono::seconds(120));
  ASSERT_EQ(running->Wait(), 0) << output;
}

// Headless Chromium, loading `url` with a few seconds of virtual time for its scripts, prints
// the DOM (`--dump-dom`) or saves a screenshot.
std::string Chromium(const std::vector<std::string>& mode, const std::string& url,
                     const std::string& profile_dir, int* exit_code) {
  std::vector<std::string> argv = {"/usr/bin/chromium",
                                   "--headless=new",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--no-first-run",
                                   "--user-data-dir=" + profile_dir,
                                   "--virtual-time-budget=5000",
                                   "--window-size=1400,1000",
                                   "--hide-scrollbars"};
  argv.insert(argv.end(), mode.begin(), mode.end());
  argv.push_back(url);
  Subprocess chromium(argv, Subprocess::Stderr::kToFile, profile_dir + ".log");
  const std::string out = chromium.ReadAll(std::chrono::seconds(60));
  *exit_code = chromium.Wait();
  return out;
}

TEST_F(OpsProcessTest, StatusJsonAndTheLivePageInChromiumShowTheRunningJob) {
  // Small windows and a reader that buffers little hold the producers back, so the epoch and
  // its tasks still run (with progress to show) while the page loads.
  testing::LocalCluster cluster(dir_.Join("cluster"), Options({"--window_bytes=65536"}));
  ASSERT_TRUE(cluster.ok());
  const int port = cluster.dispatcher_metrics_port();
  // Slow enough to still run while the page loads.
  std::unique_ptr<Subprocess> run =
      StartRun(cluster, 1, 2, dir_.Join("run.digest"), {"--max_request_bytes=4096"});
  GetStatusResponse status;
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<HttpGetResult> json = HttpGet("127.0.0.1", port, "/status.json");
    ASSERT_TRUE(json.ok()) << json.status();
    ASSERT_EQ(json->status, 200) << json->body;
    status.Clear();
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json->body, &status).ok())
        << json->body;
    if (status.epoch_progress_size() > 0 && status.task_activity_size() > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(status.state().jobs_size(), 1);
  EXPECT_EQ(status.state().jobs(0).name(), "ops-test-job");
  ASSERT_GT(status.task_activity_size(), 0);
  // The summary leaves the plan out but counts it.
  ASSERT_EQ(status.state().epochs_size(), 1);
  EXPECT_EQ(status.state().epochs(0).plan_size(), 0);
  EXPECT_EQ(status.epoch_progress(0).splits(), 20);

  // `granary status --json` prints the same summary.
  Subprocess status_command({GRANARY_BINARY, "status", "--insecure", "--json",
                             "--dispatcher=" + cluster.dispatcher_address()},
                            Subprocess::Stderr::kMergeIntoStdout);
  const std::string printed = status_command.ReadAll();
  ASSERT_EQ(status_command.Wait(), 0) << printed;
  GetStatusResponse from_command;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(printed, &from_command).ok()) << printed;
  EXPECT_EQ(from_command.state().jobs(0).name(), "ops-test-job");

  const std::string url = absl::StrCat("http://127.0.0.1:", port, "/");
  int code = -1;
  const std::string dom = Chromium({"--dump-dom"}, url, dir_.Join("chromium-dom"), &code);
  ASSERT_EQ(code, 0) << dom;
  EXPECT_THAT(dom, HasSubstr("data-loaded=\"1\"")) << dom;
  const std::string job_id = absl::StrCat(status.state().jobs(0).job_id());
  EXPECT_THAT(dom, HasSubstr("data-job-id=\"" + job_id + "\"")) << dom;
  EXPECT_THAT(dom, HasSubstr("ops-test-job"));
  EXPECT_THAT(dom,
              HasSubstr(absl::StrCat("data-task-id=\"", status.task_activity(0).task_id(), "\"")));
  EXPECT_THAT(dom, HasSubstr("worker-0"));

  // The screenshot, kept for people (docs/operations.md shows one).
  // Under the build directory when run by ctest, else gtest's temporary directory.
  const char* binary_dir = std::getenv("GRANARY_BINARY_DIR");
  const std::string outputs =
      (binary_dir != nullptr ? std::string(binary_dir) : ::testing::TempDir()) + "/test_outputs";
  ASSERT_TRUE(Env::Default()->CreateDirs(outputs).ok());
  const std::string screenshot = outputs + "/status_page.png";
  std::remove(screenshot.c_str());
  Chromium({"--screenshot=" + screenshot}, url, dir_.Join("chromium-shot"), &code);
  ASSERT_EQ(code, 0);
  std::ifstream png(screenshot, std::ios::binary);
  std::string magic(8, '\0');
  ASSERT_TRUE(png.read(magic.data(), 8)) << "no screenshot at " << screenshot;
  EXPECT_EQ(magic, "\x89PNG\r\n\x1a\n");
  run->Kill(SIGKILL);
  run->Wait();
}

TEST_F(OpsProcessTest, JsonLogsNameTheComponentWorkerJobAndTask) {
  testing::LocalClusterOptions options = Options({"--log_format=json"});
  options.dispatcher_flags.push_back("--log_format=json");
  const std::string cluster_dir = dir_.Join("cluster");
  {
    testing::LocalCluster cluster(cluster_dir, options);
    ASSERT_TRUE(cluster.ok());
    std::unique_ptr<Subprocess> run = StartRun(cluster, 1, 0, dir_.Join("run.digest"));
    const std::string output = run->ReadAll();
    ASSERT_EQ(run->Wait(), 0) << output;
  }
  absl::StatusOr<std::string> worker_log =
      ReadFileToString(Env::Default(), cluster_dir + "/logs/worker-0.log");
  ASSERT_TRUE(worker_log.ok()) << worker_log.status();
  const std::string& log = *worker_log;
  int lines = 0, with_task = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    ++lines;
    EXPECT_TRUE(absl::StartsWith(line, "{\"ts\":\"") && absl::EndsWith(line, "}")) << line;
    EXPECT_THAT(std::string(line), HasSubstr(R"("component":"worker","worker":"worker-0")"));
    if (absl::StrContains(line, "\"task\":")) ++with_task;
  }
  EXPECT_GT(lines, 0) << log;
  // Each task's runner logs its start from the task's thread.
  EXPECT_GT(with_task, 0) << log;
  EXPECT_THAT(log, HasSubstr(R"("job":)"));
  absl::StatusOr<std::string> dispatcher_log =
      ReadFileToString(Env::Default(), cluster_dir + "/logs/dispatcher.log");
  ASSERT_TRUE(dispatcher_log.ok()) << dispatcher_log.status();
  EXPECT_THAT(*dispatcher_log, HasSubstr(R"("component":"dispatcher")"));
}

// Issue 30: --metrics_tls serves the endpoint over HTTPS with the servers' own certificates
// (--tls_cert, --tls_key), verifiable against the cluster's CA; plain HTTP gets nothing from it;
// and 250 connections that never start a handshake do not delay the probe.
TEST_F(OpsProcessTest, MetricsOverTlsWithTheServersCertificates) {
  ASSERT_TRUE(Env::Default()->CreateDirs(dir_.Join("tls")).ok());
  testing::TestCertificates certificates(dir_.Join("tls"));
  ASSERT_TRUE(certificates.ok());
  testing::LocalClusterOptions options = Options({"--metrics_tls"});
  options.workers = 1;
  options.dispatcher_flags.push_back("--metrics_tls");
  options.issue_certificate = [&certificates](const std::string& name,
                                              const std::string& identity) {
    return certificates.Issue(name, identity);
  };
  testing::LocalCluster cluster(dir_.Join("cluster"), options);
  ASSERT_TRUE(cluster.ok());
  const int worker_port = cluster.worker_metrics_port(0);
  const std::string& ca = certificates.ca_file();
  absl::StatusOr<std::string> healthz = HttpsGet(worker_port, "/healthz", ca);
  ASSERT_TRUE(healthz.ok()) << healthz.status();
  EXPECT_EQ(healthz->rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << *healthz;
  EXPECT_TRUE(absl::EndsWith(*healthz, "\r\n\r\nok\n")) << *healthz;
  absl::StatusOr<std::string> metrics = HttpsGet(worker_port, "/metrics", ca);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  const size_t body = metrics->find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos) << *metrics;
  absl::StatusOr<Exposition> parsed = ParseExposition(metrics->substr(body + 4));
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<std::string> status =
      HttpsGet(cluster.dispatcher_metrics_port(), "/status.json", ca);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << status->substr(0, 200);

  absl::StatusOr<HttpGetResult> plain = HttpGet("127.0.0.1", worker_port, "/healthz");
  EXPECT_TRUE(!plain.ok() || plain->status != 200) << "plain HTTP was answered: " << plain->body;

  std::vector<int> idle;
  for (int i = 0; i < 250; ++i) {
    const int s = testing::ConnectLoopback(worker_port);
    ASSERT_GE(s, 0) << "connection " << i;
    idle.push_back(s);
  }
  for (int probe = 0; probe < 3; ++probe) {
    const auto start = std::chrono::steady_clock::now();
    healthz = HttpsGet(worker_port, "/healthz", ca);
    ASSERT_TRUE(healthz.ok()) << "probe " << probe << ": " << healthz.status();
    EXPECT_EQ(healthz->rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << *healthz;
    // Milliseconds when unloaded; 2 s leaves room for a loaded 2-core machine.
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2))
        << "probe " << probe;
  }
  for (int s : idle) ::close(s);
}

}  // namespace
}  // namespace granary
