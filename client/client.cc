// Client and Job: thin wrappers over the dispatcher's RegisterDataset, GetOrCreateJob and
// StartEpoch; the reading itself is GrpcEpochReader (epoch_reader.h).
#include "granary/client.h"

#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/connection.h"
#include "client/epoch_reader.h"
#include "client/local_workers.h"
#include "client/position.h"
#include "client/precache.h"
#include "client/reader_lease.h"
#include "common/grpc_status.h"
#include "common/param_nesting.h"
#include "common/status_macros.h"

namespace granary {

absl::StatusOr<JobTail> JobTailFromName(const std::string& name) {
  if (name == "auto") return JobTail::kAuto;
  if (name == "worker") return JobTail::kWorker;
  if (name == "client") return JobTail::kClient;
  return absl::InvalidArgumentError(
      absl::StrCat("tail '", name, "' is none of auto, worker, client"));
}
namespace {

// Thread-safe: every member is immutable or thread-safe.
class JobImpl final : public Job {
 public:
  JobImpl(std::shared_ptr<Connection> connection, int64_t job_id, Compression compression,
          int32_t local_workers, bool takeover)
      : connection_(std::move(connection)),
        job_id_(job_id),
        compression_(compression),
        local_workers_(local_workers),
        takeover_(takeover),
        reader_(ReaderIdentity::New()) {}

  int64_t job_id() const override { return job_id_; }

  absl::StatusOr<std::unique_ptr<EpochReader>> ReadEpoch(int64_t epoch, int32_t consumer,
                                                         const std::string& position) override {
    if (epoch < 0) return absl::InvalidArgumentError(absl::StrCat("epoch ", epoch, " < 0"));
    if (consumer < 0) {
      return absl::InvalidArgumentError(absl::StrCat("consumer ", consumer, " < 0"));
    }
    // Check the position before starting anything.
    std::optional<ClientPosition> start;
    if (!position.empty()) {
      ASSIGN_OR_RETURN(start, DecodePosition(position, job_id_, epoch, consumer));
    }
    ASSIGN_OR_RETURN(std::shared_ptr<const ReaderLease> lease, ClaimConsumer(consumer));
    // Local workers register before the epoch starts, so that its local tasks start on them.
    RETURN_IF_ERROR(StartLocalWorkers(consumer));
    StartEpochRequest request;
    request.set_job_id(job_id_);
    request.set_epoch(epoch);
    StartEpochResponse response;
    const grpc::Status rpc =
        connection_->CallDispatcher([&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
          return stub.StartEpoch(context, request, &response);
        });
    if (!rpc.ok()) {
      return Annotate(FromGrpcStatus(rpc),
                      absl::StrCat("starting epoch ", epoch, " of job ", job_id_));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<GrpcEpochReader> reader,
                     GrpcEpochReader::Start(connection_, job_id_, epoch, consumer,
                                            start.has_value() ? &*start : nullptr, compression_,
                                            std::move(lease)));
    return std::unique_ptr<EpochReader>(std::move(reader));
  }

  absl::StatusOr<int32_t> Scale(int32_t num_worker_slots, const std::string& reason,
                                int32_t num_local_slots) override {
    ScaleJobRequest request;
    request.set_job_id(job_id_);
    request.set_num_worker_slots(num_worker_slots);
    if (num_local_slots >= 0) request.set_num_local_slots(num_local_slots);
    request.set_reason(reason);
    ScaleJobResponse response;
    const grpc::Status rpc =
        connection_->CallDispatcher([&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
          return stub.ScaleJob(context, request, &response);
        });
    if (!rpc.ok()) {
      return Annotate(FromGrpcStatus(rpc), absl::StrCat("scaling job ", job_id_, " to ",
                                                        num_worker_slots, " tasks per consumer"));
    }
    return response.running_tasks_per_consumer();
  }

 private:
  // Claims `consumer`, as a takeover if asked; a consumer this Job claimed before is claimed
  // again (granted as it stands while the Job holds it; refused if another reader took it).
  absl::StatusOr<std::shared_ptr<const ReaderLease>> ClaimConsumer(int32_t consumer) {
    // One claim at a time: a second lease object of the same reader would release the consumer
    // when it goes.
    absl::MutexLock lock(&leases_mu_);
    const auto it = leases_.find(consumer);
    if (it != leases_.end()) {
      RETURN_IF_ERROR(it->second->Reclaim());
      return it->second;
    }
    ASSIGN_OR_RETURN(std::shared_ptr<ReaderLease> lease,
                     ReaderLease::Claim(connection_, job_id_, consumer, reader_, takeover_));
    return leases_.emplace(consumer, std::move(lease)).first->second;
  }

  // Starts this job's local workers for `consumer`, once.
  absl::Status StartLocalWorkers(int32_t consumer) {
    if (local_workers_ <= 0) return absl::OkStatus();
    absl::MutexLock lock(&mu_);
    if (local_.count(consumer) > 0) return absl::OkStatus();
    const ClientOptions& client = connection_->options();
    LocalWorkersOptions options;
    ASSIGN_OR_RETURN(options.binary, LocalWorkersBinary(client.granary_binary));
    options.dispatcher_address = client.dispatcher_address;
    options.job_id = job_id_;
    options.consumer = consumer;
    options.count = local_workers_;
    options.flags = client.local_worker_flags;
    if (client.insecure) options.flags.push_back("--insecure");
    options.log_dir = client.local_worker_log_dir;
    absl::StatusOr<std::unique_ptr<LocalWorkers>> started = LocalWorkers::Start(options);
    if (!started.ok()) {
      return Annotate(started.status(), absl::StrCat("starting job ", job_id_, "'s ",
                                                     local_workers_, " local workers"));
    }
    local_[consumer] = *std::move(started);
    return absl::OkStatus();
  }

  const std::shared_ptr<Connection> connection_;
  const int64_t job_id_;
  const Compression compression_;
  const int32_t local_workers_;
  const bool takeover_;
  const ReaderIdentity reader_;
  absl::Mutex mu_;
  // Held through each claim (RPCs included).
  absl::Mutex leases_mu_;
  // By consumer: the lease of each consumer this Job read (its readers share it).
  std::map<int32_t, std::shared_ptr<ReaderLease>> leases_ ABSL_GUARDED_BY(leases_mu_);
  // By consumer: the local workers this Job started; they stop with it.
  std::map<int32_t, std::unique_ptr<LocalWorkers>> local_ ABSL_GUARDED_BY(mu_);
};

// Thread-safe.
class ClientImpl final : public Client {
 public:
  explicit ClientImpl(std::shared_ptr<Connection> connection)
      : connection_(std::move(connection)) {}

  absl::StatusOr<std::string> RegisterPipeline(const PipelineDef& pipeline) override {
    // Checked here: the dispatcher's gRPC server cannot even parse a pipeline nested too deep.
    RETURN_IF_ERROR(Annotate(CheckParamNesting(pipeline), "registering the pipeline"));
    RegisterDatasetRequest request;
    *request.mutable_pipeline() = pipeline;
    RegisterDatasetResponse response;
    const grpc::Status rpc =
        connection_->CallDispatcher([&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
          return stub.RegisterDataset(context, request, &response);
        });
    if (!rpc.ok()) return Annotate(FromGrpcStatus(rpc), "registering the pipeline");
    return response.dataset_id();
  }

  absl::StatusOr<std::unique_ptr<Job>> OpenJob(const std::string& dataset_id,
                                               const JobSpec& spec) override {
    if (spec.num_consumers < 1) {
      return absl::InvalidArgumentError("JobSpec.num_consumers must be at least 1");
    }
    if (spec.num_worker_slots < 0 || spec.num_epochs < 0 || spec.local_workers < 0) {
      return absl::InvalidArgumentError(
          "JobSpec.num_worker_slots, num_epochs and local_workers must not be negative");
    }
    ASSIGN_OR_RETURN(const GetOrCreateJobResponse response, GetOrCreateJob(dataset_id, spec));
    const Compression compression = spec.compression == JobCompression::kLz4    ? COMPRESSION_LZ4
                                    : spec.compression == JobCompression::kZstd ? COMPRESSION_ZSTD
                                                                                : COMPRESSION_NONE;
    return std::unique_ptr<Job>(new JobImpl(connection_, response.job_id(), compression,
                                            spec.local_workers, spec.takeover));
  }

  absl::StatusOr<PrecacheResult> Precache(const std::string& dataset_id,
                                          const PrecacheSpec& spec) override {
    if (spec.cache_policy != JobCachePolicy::kFull &&
        spec.cache_policy != JobCachePolicy::kAtMark) {
      return absl::InvalidArgumentError(
          "precache: the cache policy must be full or at_mark (what the training job uses)");
    }
    JobSpec job;
    job.name = PrecacheJobName(dataset_id, spec.cache_policy, spec.seed);
    job.seed = spec.seed;
    job.num_worker_slots = spec.num_worker_slots;
    job.cache_policy = spec.cache_policy;
    PrecacheCalls calls;
    calls.look = [&] { return GetOrCreateJob(dataset_id, job); };
    calls.read_epoch = [&](int64_t job_id,
                           int64_t epoch) -> absl::StatusOr<std::unique_ptr<EpochReader>> {
      JobImpl reading(connection_, job_id, COMPRESSION_NONE, /*local_workers=*/0,
                      /*takeover=*/false);
      return reading.ReadEpoch(epoch, /*consumer=*/0, /*position=*/"");
    };
    return RunPrecache(calls, absl::Milliseconds(spec.timeout_ms));
  }

 private:
  // The dispatcher's GetOrCreateJob for `spec`.
  absl::StatusOr<GetOrCreateJobResponse> GetOrCreateJob(const std::string& dataset_id,
                                                        const JobSpec& spec) {
    GetOrCreateJobRequest request;
    request.set_dataset_id(dataset_id);
    request.set_name(spec.name);
    request.set_owner(spec.owner);
    request.mutable_options()->set_seed(spec.seed);
    request.mutable_options()->set_num_consumers(spec.num_consumers);
    request.mutable_options()->set_num_worker_slots(spec.num_worker_slots);
    request.mutable_options()->set_num_epochs(spec.num_epochs);
    for (const std::string& reader : spec.readers) request.mutable_options()->add_readers(reader);
    request.mutable_options()->set_auto_order(spec.auto_order);
    request.mutable_options()->set_placement(
        spec.placement == JobPlacement::kPecan  ? PLACEMENT_PECAN
        : spec.placement == JobPlacement::kAuto ? PLACEMENT_AUTO
                                                : PLACEMENT_STATIC);
    // A placement policy starts with no local worker and adds them; without one each local
    // worker runs a task.
    if (spec.placement == JobPlacement::kStatic) {
      request.mutable_options()->set_num_local_slots(spec.local_workers);
    }
    request.mutable_options()->set_autoscale(
        spec.autoscale == JobAutoscale::kCachew  ? AUTOSCALE_CACHEW
        : spec.autoscale == JobAutoscale::kModel ? AUTOSCALE_MODEL
                                                 : AUTOSCALE_NONE);
    request.mutable_options()->set_sharding(spec.sharding == JobSharding::kEqual ? SHARDING_EQUAL
                                            : spec.sharding == JobSharding::kDynamic
                                                ? SHARDING_DYNAMIC
                                                : SHARDING_AUTO);
    request.mutable_options()->set_remainder(spec.remainder == JobRemainder::kDrop ? REMAINDER_DROP
                                             : spec.remainder == JobRemainder::kUneven
                                                 ? REMAINDER_UNEVEN
                                                 : REMAINDER_PAD);
    request.mutable_options()->set_tail(spec.tail == JobTail::kWorker   ? TAIL_WORKER
                                        : spec.tail == JobTail::kClient ? TAIL_CLIENT
                                                                        : TAIL_AUTO);
    request.mutable_options()->set_cache_policy(
        spec.cache_policy == JobCachePolicy::kFull     ? CACHE_FULL
        : spec.cache_policy == JobCachePolicy::kAtMark ? CACHE_AT_MARK
        : spec.cache_policy == JobCachePolicy::kAuto   ? CACHE_AUTO
                                                       : CACHE_COMPUTE);
    request.set_resume_epoch(spec.resume_epoch);
    for (size_t c = 0; c < spec.resume_positions.size(); ++c) {
      ClientPosition* position = request.add_resume_positions();
      if (spec.resume_positions[c].empty()) {
        // Nothing delivered: the job is the one named, whatever its id.
        position->set_epoch(spec.resume_epoch);
        position->set_consumer(static_cast<int32_t>(c));
        continue;
      }
      absl::StatusOr<ClientPosition> parsed = ParsePosition(spec.resume_positions[c]);
      if (!parsed.ok()) {
        return Annotate(parsed.status(), absl::StrCat("resume position ", c));
      }
      if (parsed->consumer() != static_cast<int32_t>(c) || parsed->epoch() != spec.resume_epoch) {
        return absl::InvalidArgumentError(
            absl::StrCat("resume position ", c, " is consumer ", parsed->consumer(), "'s in epoch ",
                         parsed->epoch(), ", not consumer ", c, "'s in epoch ", spec.resume_epoch));
      }
      *position = *std::move(parsed);
    }
    GetOrCreateJobResponse response;
    const grpc::Status rpc =
        connection_->CallDispatcher([&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
          return stub.GetOrCreateJob(context, request, &response);
        });
    if (!rpc.ok()) {
      return Annotate(FromGrpcStatus(rpc), spec.name.empty() ? std::string("opening a job")
                                           : spec.owner.empty()
                                               ? absl::StrCat("opening job '", spec.name, "'")
                                               : absl::StrCat("opening job '", spec.name,
                                                              "' of owner '", spec.owner, "'"));
    }
    return response;
  }

  const std::shared_ptr<Connection> connection_;
};

}  // namespace

const char* JobCachePolicyName(JobCachePolicy policy) {
  switch (policy) {
    case JobCachePolicy::kFull:
      return "full";
    case JobCachePolicy::kAtMark:
      return "at_mark";
    case JobCachePolicy::kAuto:
      return "auto";
    case JobCachePolicy::kCompute:
      break;
  }
  return "compute";
}

absl::Status EpochReader::Next(ElementProto* element, bool* end) {
  ReceivedElement received;
  RETURN_IF_ERROR(Next(&received, end));
  if (!*end) *element = received.ToProto();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  ASSIGN_OR_RETURN(std::shared_ptr<Connection> connection, Connection::Open(options));
  return std::unique_ptr<Client>(new ClientImpl(std::move(connection)));
}

}  // namespace granary
