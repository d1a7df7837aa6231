// The Granary client library: what a trainer links to read a pipeline's output from a Granary
// service, every element of every epoch exactly once.
//
//   auto client = granary::Client::Connect({.dispatcher_address = "127.0.0.1:5000"});
//   auto dataset = (*client)->RegisterPipeline(granary::PipelineBuilder::Range(1000)
//                                                  .Shuffle(64).Batch(32).Build());
//   auto job = (*client)->OpenJob(*dataset, {.name = "resnet", .seed = 7});
//   for (int64_t epoch = 0; epoch < 3; ++epoch) {
//     auto reader = (*job)->ReadEpoch(epoch);
//     granary::ReceivedElement batch;
//     bool end = false;
//     while ((*reader)->Next(&batch, &end).ok() && !end) {
//       const granary::TensorView& images = batch.tensor(0);  // float32 [32, 224, 224, 3]
//       Train(images.values<float>(), images.shape);            // no copy: a view
//     }
//   }
//
// Exactly once (DESIGN.md §4): each task numbers its elements 0, 1, 2, ...; the reader keeps,
// per task, the index of the next element it needs and accepts only that one (an element it
// already has is dropped and counted), verifies each element's XXH3-64, and asks again — of the
// worker the dispatcher currently names for the task — after any failure. SavePosition() exports
// those per-task indices; a reader opened with them after a trainer restart resumes the epoch
// exactly where the saved one stood.
//
// The bytes of an element are written once, by the worker's batch op, and read in place: the
// worker sends them from where the batch op wrote them, and the reader hands them to the trainer
// as views into the buffer they arrived in (received_element.h).
#ifndef GRANARY_CLIENT_INCLUDE_GRANARY_CLIENT_H_
#define GRANARY_CLIENT_INCLUDE_GRANARY_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "granary/received_element.h"
#include "proto/pipeline.pb.h"

namespace granary {

// How the client library's errors name the options of ClientOptions: as its fields
// ("ClientOptions.tls_ca_file"), as the flags of `granary run`, `status` and `precache`
// ("--tls_ca"), or as the keywords of the Python package's granary.connect ("tls_ca").
enum class ClientOptionNaming { kFields, kFlags, kPythonKeywords };

struct ClientOptions {
  std::string dispatcher_address;
  // GetElements calls in flight at once, across the epoch's tasks.
  int max_outstanding_requests = 4;
  // Payload bytes asked for per GetElements call.
  int64_t max_bytes_per_request = 64 << 20;
  // How often a reader tells the dispatcher its position and learns where tasks run.
  int heartbeat_interval_ms = 200;
  // Deadline of each RPC.
  int rpc_timeout_ms = 10000;
  // EpochReader::Next gives up with Unavailable after waiting this long without any worker
  // answering (the reader keeps retrying in the background; calling Next again waits again).
  // RegisterPipeline, OpenJob and ReadEpoch retry a dispatcher that is Unavailable (restarting,
  // or lost while it answered) for this long too.
  int stall_timeout_ms = 60000;
  // Whether elements from a worker on this host come through shared memory (mapped, not
  // copied; transport/shm_server.h) when the worker offers it. Workers elsewhere are read over
  // TCP either way.
  bool shared_memory = true;
  // Transport security (SECURITY.md): the PEM file of the cluster's CA, and this client's
  // certificate and key — its identity, a URI SAN granary://client/<name> — which a cluster
  // running TLS requires. Plain text only when `insecure` is set (and then no file is given).
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // Instead of a client certificate: a bearer token the dispatcher knows (its --tokens_file),
  // sent with every dispatcher call — only over TLS (tls_ca_file).
  std::string bearer_token;
  bool insecure = false;
  // Local workers (JobSpec.local_workers) are `granary worker` processes of this executable
  // (empty: $GRANARY_BINARY, else this process if it is `granary`, else `granary` on $PATH),
  // started with these extra flags — in a TLS cluster a worker certificate (--tls_cert,
  // --tls_key, --tls_ca), and --data_roots for file sources, --plugin, --threads as needed
  // (--insecure is added when `insecure` is set) — each logging to
  // <local_worker_log_dir>/<worker id>.log (empty: this process's stderr).
  std::string granary_binary;
  std::vector<std::string> local_worker_flags;
  std::string local_worker_log_dir;
  // What the errors call the options above (a wrapper sets the names its users know).
  ClientOptionNaming option_naming = ClientOptionNaming::kFields;
};

// Which epochs of a job write and read the dispatcher's Put/Get cache (the dispatcher needs
// --cache_root). The cached prefix — the whole pipeline (kFull) or the source and the ops up to
// its first `mark` op (kAtMark) — is computed once, in the job's first epoch, and read from the
// cache in later epochs (and by later jobs with the same prefix and seed); ops after the mark
// still run every epoch. Like tf.data's cache, every epoch therefore sees the prefix output of
// the first: its shuffling and random augmentations are not redrawn. kAuto: the dispatcher
// decides from what a worker measures before the first epoch (issue 18) whether to cache and at
// which mark — or to compute; every op up to the last mark runs as in the first epoch whatever
// it decides, so the data does not depend on the decision. The first ReadEpoch waits for it.
enum class JobCachePolicy { kCompute, kFull, kAtMark, kAuto };
// "compute", "full", "at_mark", "auto" (the names `granary run --cache_policy` takes).
const char* JobCachePolicyName(JobCachePolicy policy);

// How a job's elements travel from workers on other hosts (transport/compression.h): LZ4 (fast)
// or Zstandard (smaller, slower), compressed by the worker per element and decompressed by the
// reader into the element's buffer. Worth it on a slow network for compressible data (labels,
// uint8 images); float32 batches barely compress. Never applied through shared memory.
enum class JobCompression { kNone, kLz4, kZstd };

// Whether the dispatcher sets the job's workers itself from the trainers' and workers' metrics
// (each decision a scaling step, as Job::Scale makes, shown in `granary status`): by Cachew's
// rule — one worker per decision while the batch time improves by more than 7% — or by
// Granary's model — straight to ceil(the trainer's consumption / a worker's rate).
enum class JobAutoscale { kNone, kCachew, kModel };

// Whether the dispatcher places the job's workers itself (issue 17; needs local workers to
// place any locally): by Pecan's AutoPlacement — local workers first, one per decision, while
// they slow the trainer by at most 10%, then remote ones while each pays for itself at the
// dispatcher's prices — or by Granary's model, which measures one local worker and then jumps to
// the cheapest placement within 5% of the best batch time.
enum class JobPlacement { kStatic, kPecan, kAuto };

// How each epoch is divided among a job's consumers (DESIGN.md §6, "Consumers and shares").
// kEqual: each consumer reads its own deterministic share of the epoch's splits, and all of them
// deliver the same number of elements per epoch (JobRemainder says how) — what
// DistributedDataParallel needs: every rank takes as many steps. kDynamic: whichever consumer
// asks first takes the next split (throughput first; shares unequal). kAuto: kEqual for a job of
// more than one consumer, else kDynamic.
enum class JobSharding { kAuto, kDynamic, kEqual };
// Equal shares: what a consumer with more elements than another does with the difference.
// kPad: consumers with fewer deliver copies of their last element, marked padding(), up to the
// most any consumer has (DistributedSampler's default). kDrop: consumers with more read the
// surplus and do not deliver it (EpochStats.remainder_dropped counts it), down to the fewest
// (drop_last). kUneven: no rule (each consumer delivers its share as it is).
enum class JobRemainder { kPad, kDrop, kUneven };
// Where the pipeline's trainer-side tail runs — its last normalize ops when only batch and
// prefetch follow them, which turn uint8 images into float32 ones four times their size
// (pipeline/trainer_tail.h; epochs that read or write the cache keep it on the worker). kAuto: in
// this client for a task it reads by bytes (TCP), so the wire carries uint8 images; on the worker
// for a task read through shared memory (the first reader of a task shared by several consumers
// decides for all). kWorker: always on the worker. kClient: always here. The delivered tensors
// are byte-identical either way.
enum class JobTail { kAuto, kWorker, kClient };
// The JobTail named "auto", "worker" or "client" (the CLI's and Python's spelling);
// InvalidArgument "tail '<name>' is none of auto, worker, client" otherwise.
absl::StatusOr<JobTail> JobTailFromName(const std::string& name);

struct JobSpec {
  // Jobs with the same non-empty name are shared (every consumer of a job opens it by name).
  // Names are per owner when the cluster authenticates clients (SECURITY.md): a name opens this
  // client's own job of that name, or creates it.
  std::string name;
  // To open a job another client shared with this one (its `readers` name this client): that
  // client's id. The job must exist (NotFound) and list this client (PermissionDenied). Empty:
  // this client's own job.
  //
  // The rest of the spec, but for `compression` and (with a placement policy) `local_workers`,
  // which are per reader, must be what an existing job was created with — whoever opens it —
  // or OpenJob fails with InvalidArgument naming the field and both values ("job 'resnet' has
  // num_consumers 2; this request gives 4"); `readers` compare as a set, and the slot counts
  // as given at creation (scaling steps since do not count).
  std::string owner;
  uint64_t seed = 0;
  // Trainer processes reading the job: each epoch is divided among them.
  int32_t num_consumers = 1;
  // Tasks per consumer and epoch; 0 = one per live worker.
  int32_t num_worker_slots = 0;
  // 0 = unlimited.
  int64_t num_epochs = 0;
  JobCachePolicy cache_policy = JobCachePolicy::kCompute;
  // How this trainer's readers ask for the job's elements (a per-reader choice: two trainers of
  // one job may differ).
  JobCompression compression = JobCompression::kNone;
  // Clients besides this one that may open and read the job (its ACL) when the cluster
  // authenticates clients (SECURITY.md); the job's owner is the client that creates it.
  std::vector<std::string> readers;
  JobAutoscale autoscale = JobAutoscale::kNone;
  // Local workers (Pecan's): worker processes this client starts on its own host, for each
  // consumer it reads, before reading (ClientOptions.granary_binary and local_worker_flags say
  // how). They serve only this trainer, through shared memory, and stop with the Job. With
  // placement kStatic each runs one task of every epoch (the job's num_local_slots, for a job
  // this open creates); with a placement policy the policy decides how many of them work.
  int32_t local_workers = 0;
  JobPlacement placement = JobPlacement::kStatic;
  // Workers run the pipeline reordered by AutoOrder (pipeline/optimizer/auto_order.h): swaps
  // that change no output byte, shrinking ops first.
  bool auto_order = false;
  JobSharding sharding = JobSharding::kAuto;
  JobRemainder remainder = JobRemainder::kPad;
  // Elastic resume (DESIGN.md §6): to open an existing job at another num_consumers than it
  // has, the positions all of its consumers saved in epoch `resume_epoch`:
  // resume_positions[c] is consumer c's EpochReader::SavePosition() ("": it had delivered
  // nothing of that epoch). The rest of that epoch is then dealt to the num_consumers new
  // consumers (each reads it from ReadEpoch(resume_epoch, consumer) without a position), and
  // later epochs run at num_consumers. Every new consumer may pass the same positions; the
  // first to open resumes the job. Without them a different num_consumers is refused.
  int64_t resume_epoch = 0;
  std::vector<std::string> resume_positions;
  // One reader per consumer (DESIGN.md §6): the Job's ReadEpoch claims its consumer, which
  // another live reader holding it refuses with FailedPrecondition naming that reader; a holder
  // that looks gone (silent, e.g. this trainer's crashed predecessor) is waited for until its
  // lease expires (the dispatcher's --worker_timeout_ms of silence). With `takeover` the Job's
  // first claim of each consumer takes it at once even from a live reader, which is fenced:
  // its reads fail with Aborted from its next heartbeat on (EpochReader::Next), and nothing it
  // did not acknowledge counts as delivered — for a trainer restarted on another host while its
  // predecessor may still run. Not an option of the job: each opener chooses.
  bool takeover = false;
  // Where the pipeline's trainer-side tail runs (JobTail above). An option of the job.
  JobTail tail = JobTail::kAuto;
};

// Client::Precache: which cache to fill before training starts.
struct PrecacheSpec {
  uint64_t seed = 0;
  // kFull (the whole pipeline's output) or kAtMark (up to its first mark): the policy, pipeline
  // and seed of the training job that will read the cache.
  JobCachePolicy cache_policy = JobCachePolicy::kFull;
  // Tasks of the Put epoch; 0 = one per live worker.
  int32_t num_worker_slots = 0;
  // How long to wait for the cache once the Put epoch is read, or for another job's Put of it.
  int64_t timeout_ms = 10 * 60 * 1000;
};

struct PrecacheResult {
  std::string cache_key;
  // The cache was complete before: nothing was read.
  bool already_complete = false;
  // Elements of the cached prefix.
  int64_t num_elements = 0;
  // Elements of the Put epoch this call read (the whole pipeline's output, discarded).
  int64_t elements_read = 0;
};

struct EpochStats {
  // Elements Next() returned, and their serialized size.
  int64_t elements = 0;
  int64_t payload_bytes = 0;
  // Microseconds the trainer waited in Next() for the elements (and padding) it returned: time
  // the input pipeline held training up.
  int64_t wait_us = 0;
  // Elements received again (an index the reader already had): dropped, never delivered.
  int64_t duplicates_dropped = 0;
  // Elements workers recomputed and discarded to resume a task after a restart or takeover.
  int64_t recomputed_dropped = 0;
  // GetElements calls that failed and were retried.
  int64_t retries = 0;
  // Payloads whose XXH3-64 did not match their checksum (dropped, and asked for again).
  int64_t checksum_mismatches = 0;
  // Elements Next() returned that came through shared memory (mapped, not copied) rather than
  // over TCP.
  int64_t shared_memory_elements = 0;
  // Equal shares (JobSpec.sharding): elements read and not delivered by REMAINDER_DROP, and
  // padding elements Next() returned under REMAINDER_PAD (not counted in `elements`).
  int64_t remainder_dropped = 0;
  int64_t padding = 0;
  // Elements Next() returned whose trainer-side tail (JobSpec.tail) this reader ran.
  int64_t trainer_tail_elements = 0;
};

// Reads one epoch for one consumer. Thread-compatible (one trainer thread calls Next).
class EpochReader {
 public:
  virtual ~EpochReader() = default;
  // The next element of the epoch (elements of different tasks interleave in arrival order),
  // or *end = true when every task's elements have all been delivered. Errors: DataLoss for a
  // payload whose checksum does not match after retries; Unavailable when no worker answers
  // for ClientOptions.stall_timeout_ms (the reader keeps its position: calling Next again
  // retries); OutOfRange when a worker says a task ends before the reader's position; Aborted
  // once this reader learns that another reader took its consumer over (JobSpec.takeover: this
  // reader is fenced) — at its next heartbeat (heartbeat_interval_ms) or call to a worker the
  // new reader read from, at once then, elements queued or not. Elements handed out between the
  // takeover and then were never acknowledged: they count as not delivered (the new reader
  // delivers them from its position).
  virtual absl::Status Next(ReceivedElement* element, bool* end) = 0;
  // The same, as a copy into an ElementProto, for code written against it: a parse and a copy
  // of every value that Next(ReceivedElement*) does not make — and no padding() mark (equal
  // shares under REMAINDER_PAD: count them with stats().padding, or use the other overload).
  absl::Status Next(ElementProto* element, bool* end);
  // The reader's position: per task, the index of the next element it has not delivered (and,
  // in an equal-shares epoch, how many were dropped or padded so far).
  virtual std::string SavePosition() const = 0;
  virtual EpochStats stats() const = 0;
  // Equal shares under REMAINDER_DROP: `observer` sees each element the reader reads and drops
  // instead of delivering (called from Next(), on the trainer's thread) — to count or check
  // what the remainder rule left out. Set it before the first Next().
  virtual void SetDropObserver(std::function<void(const ReceivedElement&)> observer) = 0;
};

// Thread-safe.
class Job {
 public:
  virtual ~Job() = default;
  virtual int64_t job_id() const = 0;
  // Starts epoch `epoch` (idempotently: every consumer may call it) and reads it as
  // `consumer`. With `position` (SavePosition() of an earlier reader of this job, epoch and
  // consumer) the reader resumes there. FailedPrecondition for an epoch that is not the job's
  // next one or an existing one, and for a consumer another live reader holds (JobSpec.takeover);
  // InvalidArgument for a position of another job, epoch or consumer. A reader whose consumer
  // another reader took over fails with Aborted (in Next(), at once).
  virtual absl::StatusOr<std::unique_ptr<EpochReader>> ReadEpoch(
      int64_t epoch, int32_t consumer = 0, const std::string& position = "") = 0;
  // Sets the job's remote tasks per consumer (JobSpec.num_worker_slots) — and, with
  // `num_local_slots` >= 0, its local ones — for the epochs it starts later and for its running
  // epoch: tasks join it on more workers, or the newest are shed —
  // they lease no more splits, finish those they hold and end — while readers follow, every
  // element still delivered exactly once. `reason` shows in `granary status`. Returns the
  // running epoch's leasing tasks per consumer after the step (0: no epoch running; an epoch
  // whose splits are all leased keeps its tasks). InvalidArgument unless remote + local is in
  // [1, 4096]; PermissionDenied for a job this client may not read.
  virtual absl::StatusOr<int32_t> Scale(int32_t num_worker_slots, const std::string& reason = "",
                                        int32_t num_local_slots = -1) = 0;
};

// Thread-safe.
class Client {
 public:
  virtual ~Client() = default;
  // Waits up to options.rpc_timeout_ms for the dispatcher to accept a connection: Unavailable
  // naming its address if it does not; within a second, FailedPrecondition when it speaks TLS
  // and the options ask for plain text or the reverse, Unauthenticated when its certificate
  // does not verify against tls_ca_file or it refuses this client's — each naming the option to
  // change; InvalidArgument for options out of range. Jobs and readers may outlive the Client.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  // Registers a pipeline; returns its dataset id. InvalidArgument names what is wrong with it
  // (params nested deeper than 16 levels are refused before anything is sent).
  virtual absl::StatusOr<std::string> RegisterPipeline(const PipelineDef& pipeline) = 0;
  virtual absl::StatusOr<std::unique_ptr<Job>> OpenJob(const std::string& dataset_id,
                                                       const JobSpec& spec) = 0;
  // Fills the cache a training job with `spec`'s policy and seed will read (issue 20), without
  // a trainer: a job named after the dataset, policy and seed runs a Put epoch, which this call
  // reads to its end (discarding the elements) and returns once the dispatcher has the cache
  // complete — so the training job's first epoch is a Get. Idempotent: a complete cache returns
  // at once; after an interruption (this process killed, workers killed) calling it again
  // resumes the Put epoch where the job stands (exactly once, as any epoch). Another job's Put
  // of the same cache is waited for. Errors: InvalidArgument for a compute or auto policy or
  // a pipeline without the mark; FailedPrecondition for a cache found invalid (it is remade once
  // evicted) or a dispatcher without --cache_root; DeadlineExceeded past spec.timeout_ms.
  virtual absl::StatusOr<PrecacheResult> Precache(const std::string& dataset_id,
                                                  const PrecacheSpec& spec) = 0;
};

// A parameter value for PipelineBuilder.
using ParamValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>,
                                std::vector<double>, std::vector<std::string>>;
using ParamList = std::vector<std::pair<std::string, ParamValue>>;

// Builds a PipelineDef in code rather than JSON:
//   PipelineBuilder::TfRecord({"/data/train-*.tfrecord"})
//       .ParallelMap("decode_jpeg", 2).Map("random_flip").Batch(128).Build();
class PipelineBuilder {
 public:
  static PipelineBuilder Range(int64_t stop, ParamList params = {});
  static PipelineBuilder TfRecord(std::vector<std::string> files, ParamList params = {});
  static PipelineBuilder TextLines(std::vector<std::string> files, ParamList params = {});
  // Continues an existing definition (e.g. one read from a JSON file).
  static PipelineBuilder FromDef(PipelineDef def);

  PipelineBuilder& Map(const std::string& udf, ParamList udf_params = {});
  PipelineBuilder& ParallelMap(const std::string& udf, int num_threads, ParamList udf_params = {});
  PipelineBuilder& Filter(const std::string& udf, ParamList udf_params = {});
  PipelineBuilder& Shuffle(int64_t buffer_size);
  PipelineBuilder& Batch(int64_t batch_size, bool drop_remainder = false);
  PipelineBuilder& Take(int64_t count);
  PipelineBuilder& Skip(int64_t count);
  PipelineBuilder& Prefetch(int64_t buffer_size = 2);
  PipelineBuilder& Mark(const std::string& name);

  PipelineDef Build() const { return def_; }

 private:
  PipelineDef def_;
};

}  // namespace granary

#endif  // GRANARY_CLIENT_INCLUDE_GRANARY_CLIENT_H_
