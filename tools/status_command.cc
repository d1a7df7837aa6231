// granary status: what a dispatcher knows — jobs, epochs, tasks, workers — and what its live
// workers say of their tasks (transport, window). Given several addresses (a replicated
// dispatcher's replicas), it first says which replica leads and which are up (replica_probe.h).
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "client/client_security.h"
#include "common/dispatcher_targets.h"
#include "common/env.h"
#include "common/grpc_status.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "obs/progress_line.h"
#include "proto/dispatcher.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "tools/client_flags.h"
#include "tools/command_flags.h"
#include "tools/commands.h"
#include "tools/replica_probe.h"
#include "tools/status_json.h"

// Of client_flags.h only --config (which may name a token file); --token_file is not a flag here.
GRANARY_COMMAND_BORROWS_FLAG(std::string, config);
ABSL_FLAG(std::string, dispatcher, "",
          "Dispatcher address, host:port; for a replicated dispatcher its replicas' addresses "
          "separated by commas (calls follow the leader).");
ABSL_FLAG(bool, json, false,
          "Print the status as JSON (the status page's /status.json: summary, one object per "
          "line) instead of text.");
ABSL_FLAG(bool, watch, false,
          "Print the status again every 2 seconds until interrupted (on a terminal, in place).");

namespace granary {
namespace {

// How long each replica is given to answer its probe.
constexpr absl::Duration kReplicaProbeDeadline = absl::Seconds(1);

// What each live worker says of itself (its status RPC, one second each): how it serves clients
// on its host and, per task it runs, the transport of its last answer and its window.
void PrintWorkerStatus(const DispatcherStateProto& s, const std::set<std::string>& live,
                       const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  for (const WorkerState& w : s.workers()) {
    if (w.lost() || !live.count(w.worker_id())) continue;
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    auto stub = Worker::NewStub(grpc::CreateCustomChannel(w.address(), credentials, args));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    GetWorkerStatusResponse status;
    const grpc::Status rpc = stub->GetWorkerStatus(&context, GetWorkerStatusRequest(), &status);
    if (!rpc.ok()) {
      std::printf("worker %s: no status: %s\n", w.worker_id().c_str(), rpc.error_message().c_str());
      continue;
    }
    std::printf(
        "worker %s: %s, %lld shared-memory sessions; buffer pool %lld MB live, %lld MB "
        "cached, %lld blocks mapped, %lld reused\n",
        w.worker_id().c_str(),
        status.shared_memory() ? "shared memory for clients on its host" : "TCP only",
        static_cast<long long>(status.shm_sessions()),
        static_cast<long long>(status.pool_live_bytes() >> 20),
        static_cast<long long>(status.pool_cached_bytes() >> 20),
        static_cast<long long>(status.pool_maps()), static_cast<long long>(status.pool_reuses()));
    for (const TaskStatus& t : status.tasks()) {
      std::printf(
          "  task %lld gen %lld: %s, produced %lld, window %lld..%lld (%lld of %lld MB)%s\n",
          static_cast<long long>(t.task_id()), static_cast<long long>(t.generation()),
          t.transport().empty() ? "not read yet" : ("read by " + t.transport()).c_str(),
          static_cast<long long>(t.produced()), static_cast<long long>(t.window_start()),
          static_cast<long long>(t.produced()), static_cast<long long>(t.buffered_bytes() >> 20),
          static_cast<long long>(t.window_bytes() >> 20), t.finished() ? ", ended" : "");
    }
  }
}

// `status_json` (an object) with "replicas": `replicas` as its first member.
std::string WithReplicas(const std::string& status_json, const google::protobuf::Value& replicas) {
  std::string replicas_json;
  // A Value of strings, lists and objects always prints.
  (void)google::protobuf::util::MessageToJsonString(replicas, &replicas_json);
  return absl::StrCat("{\"replicas\":", replicas_json, status_json.size() > 2 ? "," : "",
                      status_json.substr(1));
}

// Prints the dispatcher's status once (text, or JSON on one line), after the replicas' (when
// `replicas` holds probes); 1 when it did not answer.
int PrintStatus(DispatcherTargets& dispatcher, const std::string& address,
                const std::shared_ptr<grpc::ChannelCredentials>& credentials, bool json,
                const std::vector<ReplicaProbe>& replicas) {
  if (!json && !replicas.empty()) std::printf("%s", ReplicasText(replicas).c_str());
  GetStatusRequest request;
  request.set_summary(json);
  GetStatusResponse status;
  const grpc::Status rpc = dispatcher.Call(
      [] {
        auto context = std::make_unique<grpc::ClientContext>();
        context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        return context;
      },
      [&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
        return stub.GetStatus(context, request, &status);
      });
  if (!rpc.ok()) {
    std::fprintf(stderr, "granary status: dispatcher %s: %s\n", address.c_str(),
                 rpc.error_message().c_str());
    return 1;
  }
  if (json) {
    const std::string status_json = StatusJson(status);
    std::printf("%s\n", replicas.empty()
                            ? status_json.c_str()
                            : WithReplicas(status_json, ReplicasJson(replicas)).c_str());
    return 0;
  }
  const DispatcherStateProto& s = status.state();
  const std::set<std::string> live(status.live_workers().begin(), status.live_workers().end());
  std::printf("journal: %llu records applied\n", static_cast<unsigned long long>(s.applied_seq()));
  std::printf("workers (%d):\n", s.workers_size());
  std::map<std::string, int> load;
  for (const TaskState& t : s.tasks()) {
    if (!t.finished()) ++load[t.worker_id()];
  }
  for (const WorkerState& w : s.workers()) {
    const std::string local =
        w.local_job_id() == 0
            ? std::string(w.standby() ? "standby" : "")
            : absl::StrCat("local to job ", w.local_job_id(), " consumer ", w.local_consumer());
    std::printf("  %-16s %-22s incarnation %-3lld %-8s %-7s %d tasks\n", w.worker_id().c_str(),
                w.address().c_str(), static_cast<long long>(w.incarnation()),
                w.lost() ? "LOST" : (live.count(w.worker_id()) ? "live" : "silent"), local.c_str(),
                load[w.worker_id()]);
  }
  std::printf("jobs (%d):\n", s.jobs_size());
  for (const JobState& j : s.jobs()) {
    // Names are per owner: two clients' jobs may share one.
    const std::string name =
        j.name().empty() ? "(anonymous)"
                         : absl::StrCat("'", j.name(), "'",
                                        j.owner().empty() ? "" : absl::StrCat(" of ", j.owner()));
    std::printf(
        "  job %lld %s dataset %s seed %llu consumers %d tasks per consumer %d remote + %d "
        "local%s epochs started %lld\n",
        static_cast<long long>(j.job_id()), name.c_str(), j.dataset_id().c_str(),
        static_cast<unsigned long long>(j.options().seed()), j.options().num_consumers(),
        j.options().num_worker_slots(), j.options().num_local_slots(),
        j.options().autoscale() != AUTOSCALE_NONE
            ? absl::StrCat(" (autoscale ", Autoscale_Name(j.options().autoscale()), ")").c_str()
        : j.options().placement() != PLACEMENT_STATIC
            ? absl::StrCat(" (placement ", Placement_Name(j.options().placement()), ")").c_str()
            : "",
        static_cast<long long>(j.epochs_started()));
    if (j.options().num_consumers() > 1) {
      // DESIGN.md §6, "Consumers and shares".
      const bool equal = j.options().sharding() != SHARDING_DYNAMIC;
      std::printf("    shares: %s\n",
                  equal ? absl::StrCat("equal (remainder ",
                                       absl::AsciiStrToLower(absl::StripPrefix(
                                           Remainder_Name(j.options().remainder()), "REMAINDER_")),
                                       ")")
                              .c_str()
                        : "dynamic");
    }
    if (j.scaling_steps() > 0) {
      std::printf("    scaled %lld times; last: %s\n", static_cast<long long>(j.scaling_steps()),
                  j.last_scaling().c_str());
    }
    if (j.options().cache_policy() == CACHE_AUTO) {
      std::printf("    cache_policy auto: %s\n", j.has_cache_decision()
                                                     ? j.cache_decision().reason().c_str()
                                                     : "waiting for a worker's profile");
    }
  }
  std::printf("epochs (%d):\n", s.epochs_size());
  for (const EpochState& e : s.epochs()) {
    const char* cache = e.cache().cache_key().empty()         ? ""
                        : e.cache().mode() == EpochCache::PUT ? ", writes cache "
                        : e.cache().mode() == EpochCache::GET ? ", reads cache "
                                                              : ", computes (cache busy) ";
    std::printf("  job %lld epoch %lld: %lld/%d splits leased, %d tasks%s%s%s\n",
                static_cast<long long>(e.job_id()), static_cast<long long>(e.epoch()),
                static_cast<long long>(e.next_split()), e.plan_size(), e.task_ids_size(),
                e.finished() ? ", finished" : "", cache, e.cache().cache_key().c_str());
  }
  std::printf("caches (%d):\n", s.caches_size());
  for (const CacheState& c : s.caches()) {
    std::printf("  cache %s: written by job %lld epoch %lld, %s", c.cache_key().c_str(),
                static_cast<long long>(c.put_job_id()), static_cast<long long>(c.put_epoch()),
                c.complete() ? "complete" : "being written\n");
    if (c.complete()) {
      std::printf(": %d chunks, %lld elements, %lld bytes%s%s\n", c.chunks_size(),
                  static_cast<long long>(c.num_elements()), static_cast<long long>(c.bytes()),
                  c.invalid() ? "; INVALID, not served: " : "", c.invalid_reason().c_str());
    }
  }
  std::printf("tasks (%d):\n", s.tasks_size());
  for (const TaskState& t : s.tasks()) {
    std::printf(
        "  task %lld job %lld epoch %lld consumer %d slot %d: worker %s gen %lld, "
        "%d splits%s%s%s\n",
        static_cast<long long>(t.task_id()), static_cast<long long>(t.job_id()),
        static_cast<long long>(t.epoch()), t.consumer(), t.slot(),
        t.worker_id().empty() ? "(none)" : t.worker_id().c_str(),
        static_cast<long long>(t.generation()), t.leased_size(), t.local() ? ", local" : "",
        t.draining() ? ", shed" : "",
        t.finished() ? (", finished: " + std::to_string(t.num_elements()) + " elements").c_str()
                     : "");
  }
  PrintWorkerStatus(s, live, credentials);
  return 0;
}

}  // namespace

int StatusCommand(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "granary status (--dispatcher HOST:PORT (--tls_ca CA [--tls_cert C --tls_key K] | "
      "--insecure) | --config FILE) [--json] [--watch]");
  ParseCommandFlags(argc, argv);
  const absl::StatusOr<ClientOptions> options = ClientConnectionFromFlags(Env::Default());
  if (!options.ok()) {
    std::fprintf(stderr, "granary status: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  const std::string& address = options->dispatcher_address;
  const absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ClientChannelCredentials(*options);
  if (!credentials.ok()) {
    std::fprintf(stderr, "granary status: %s\n",
                 std::string(credentials.status().message()).c_str());
    return 2;
  }
  // The whole state, however large: no 4 MiB message limit.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  absl::StatusOr<std::unique_ptr<DispatcherTargets>> dispatcher =
      DispatcherTargets::Create(address, "--dispatcher", *credentials, args);
  if (!dispatcher.ok()) {
    std::fprintf(stderr, "granary status: %s\n",
                 std::string(dispatcher.status().message()).c_str());
    return 2;
  }
  const bool json = absl::GetFlag(FLAGS_json);
  const bool terminal = ProgressLine::IsTerminal(stdout);
  // Several addresses are a replicated dispatcher's replicas: each is probed.
  const std::vector<std::string> addresses = absl::StrSplit(address, ',');
  while (true) {
    if (absl::GetFlag(FLAGS_watch) && terminal && !json) std::printf("\x1b[H\x1b[2J");
    const std::vector<ReplicaProbe> replicas =
        addresses.size() > 1 ? ProbeReplicas(addresses, *credentials, kReplicaProbeDeadline)
                             : std::vector<ReplicaProbe>();
    const int code = PrintStatus(**dispatcher, address, *credentials, json, replicas);
    std::fflush(stdout);
    if (!absl::GetFlag(FLAGS_watch)) return code;
    absl::SleepFor(absl::Seconds(2));
    if (!terminal && !json) std::printf("\n");
  }
}

}  // namespace granary
