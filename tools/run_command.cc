// granary run: a client of a Granary service (DESIGN.md §7). Reads a pipeline's epochs through
// the client library as one consumer of a job, prints per-epoch progress and writes the digest
// file of DESIGN.md §6, which must equal `granary local`'s for the same pipeline and seed.
//
// With --position_file F the run can be killed (even SIGKILLed) and started again with the same
// flags: it resumes exactly where the file says (client/run_position.h), and each element of the
// epoch is delivered exactly once across both processes. The digest line of a resumed epoch
// covers the whole epoch: both processes' rows ("elements") and multiset digest; its ordered
// digest covers only the rows this process delivered. The digest file is rewritten atomically
// after each epoch, keeping the lines an earlier run wrote; a kill between writing an epoch's
// line and its final position leaves that epoch's line twice, with the same multiset digest.
//
// With several consumers (--consumer C --num_consumers K, a shared --job_name), each process
// digests its share of every epoch; the multiset digests of the K shares add up (mod 2^64) to
// the epoch's.
//
// When workers fail the reader retries in the background (new addresses and generations come
// from the dispatcher); the run exits 1 only after --stall_timeout_ms without any worker
// answering, naming the tasks it waits for and their last errors.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cache/cache_policy.h"
#include "client/position.h"
#include "client/run_position.h"
#include "common/env.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "granary/client.h"
#include "obs/progress_line.h"
#include "pipeline/core/element.h"
#include "pipeline/digests/epoch_digest.h"
#include "pipeline/pipeline.h"
#include "pipeline/pipeline_loader.h"
#include "tools/client_flags.h"
#include "tools/command_flags.h"
#include "tools/commands.h"
#include "tools/tls_flags.h"
#include "tools/udf_flags.h"
#include "transport/compression.h"

GRANARY_COMMAND_BORROWS_FLAG(std::string, dispatcher);  // status_command.cc
GRANARY_COMMAND_BORROWS_FLAG(std::string, pipeline);
GRANARY_COMMAND_BORROWS_FLAG(int64_t, epochs);
GRANARY_COMMAND_BORROWS_FLAG(uint64_t, seed);
GRANARY_COMMAND_BORROWS_FLAG(std::string, digest_out);
GRANARY_COMMAND_BORROWS_FLAG(std::string, cache_policy);

GRANARY_COMMAND_BORROWS_FLAG(bool, auto_order);  // local_command.cc
ABSL_FLAG(std::string, job_name, "",
          "Name of the job: consumers of one job and a resumed run open it by name. Empty: a "
          "new anonymous job.");
ABSL_FLAG(std::string, job_owner, "",
          "Whose job --job_name is: empty for your own (created when absent); another client's "
          "id to open the job it shared with you (its readers name you). Also for `granary "
          "scale`.");
ABSL_FLAG(std::vector<std::string>, readers, {},
          "Comma-separated clients besides the job's owner that may read it (its ACL, when the "
          "cluster authenticates clients). Every open of the job gives the same set.");
ABSL_FLAG(int32_t, consumer, 0, "Which consumer of the job this process is (0-based).");
ABSL_FLAG(int32_t, num_consumers, 1, "Consumers of the job (when the job is created).");
ABSL_FLAG(int32_t, num_worker_slots, 0,
          "Tasks per consumer and epoch (when the job is created); 0 = one per live worker.");
ABSL_FLAG(std::string, position_file, "",
          "Save the read position here and resume from it when it exists (needs --job_name).");
ABSL_FLAG(int32_t, stall_timeout_ms, 60000, "Fail after this long without any worker answering.");
ABSL_FLAG(int32_t, rpc_timeout_ms, 10000,
          "Deadline of each RPC, and how long to wait for the dispatcher at start.");
ABSL_FLAG(int32_t, max_outstanding_requests, 4, "GetElements calls in flight at once.");
ABSL_FLAG(std::string, compression, "none",
          "How elements from workers read over TCP are compressed: none, lz4 or zstd.");
ABSL_FLAG(bool, shared_memory, true,
          "Read elements of workers on this host through shared memory when they offer it "
          "(--noshared_memory: always over TCP).");
ABSL_FLAG(int64_t, max_request_bytes, 64 << 20, "Payload bytes asked for per GetElements call.");
ABSL_FLAG(std::string, autoscale, "none",
          "Whether the dispatcher sets the job's workers from the measured rates: none, cachew "
          "(one worker per decision) or model (straight to what the rates call for).");
ABSL_FLAG(int32_t, local_workers, 0,
          "Local workers (Pecan's): start this many `granary worker` processes of this binary on "
          "this host for this consumer; they serve only it, through shared memory.");
ABSL_FLAG(std::string, local_worker_flags, "",
          "More flags for the local workers, space-separated: in a TLS cluster a worker "
          "certificate (--tls_cert=... --tls_key=... --tls_ca=...), --data_roots=... for file "
          "sources. --insecure is passed on.");
ABSL_FLAG(std::string, placement, "static",
          "Whether the dispatcher places the job's workers, local and remote, from the measured "
          "rates and prices: static, pecan (Pecan's AutoPlacement, one worker per decision) or "
          "auto (Granary's model).");
ABSL_FLAG(std::string, sharding, "auto",
          "How epochs are divided among the consumers: equal (each consumer its own share, all "
          "delivering as many elements), dynamic (the fastest takes the most), or auto (equal "
          "for more than one consumer).");
ABSL_FLAG(std::string, remainder, "pad",
          "Equal shares: pad (consumers with fewer elements hand out copies of their last), drop "
          "(consumers with more drop the surplus) or uneven.");
ABSL_FLAG(std::string, tail, "auto",
          "Where the pipeline's trainer-side tail (its last normalize-like ops) runs: auto (here "
          "for tasks read over TCP, on the worker for shared memory), worker or client. The "
          "delivered bytes are the same.");
ABSL_FLAG(bool, takeover, false,
          "Read the consumer even if another live reader holds it: that reader is fenced (its "
          "next read fails). Without it a held consumer is refused, naming its reader.");
ABSL_FLAG(int32_t, step_ms, 0,
          "Simulated training step: sleep this long after each element (0: read as fast as "
          "possible).");

namespace granary {
namespace {

constexpr absl::Duration kPositionInterval = absl::Milliseconds(100);

// Writes `data` to `path` atomically: a temp file beside it, then a rename.
absl::Status WriteAtomically(Env* env, const std::string& path, const std::string& data,
                             bool sync) {
  const std::string temp = absl::StrCat(path, ".tmp");
  RETURN_IF_ERROR(WriteStringToFile(env, temp, data, sync));
  return env->RenameFile(temp, path);
}

// The digest line of an epoch whose first `resumed` part an earlier process delivered: rows and
// multiset digest of both parts, the ordered digest of this process's part.
DigestLine ResumedDigestLine(int64_t epoch, const RunPosition& resumed, const EpochDigest& mine,
                             int64_t duplicates) {
  return {epoch, resumed.rows + mine.rows(), resumed.multiset + mine.multiset(), mine.ordered(),
          resumed.duplicates + duplicates};
}

absl::Status Run() {
  const std::string pipeline_path = absl::GetFlag(FLAGS_pipeline);
  const int64_t epochs = absl::GetFlag(FLAGS_epochs);
  const std::string job_name = absl::GetFlag(FLAGS_job_name);
  const int32_t consumer = absl::GetFlag(FLAGS_consumer);
  const std::string position_file = absl::GetFlag(FLAGS_position_file);
  const std::string digest_out = absl::GetFlag(FLAGS_digest_out);
  if (pipeline_path.empty()) return absl::InvalidArgumentError("--pipeline is required");
  if (epochs < 1) return absl::InvalidArgumentError("--epochs must be at least 1");
  if (consumer < 0 || consumer >= absl::GetFlag(FLAGS_num_consumers)) {
    return absl::InvalidArgumentError("--consumer must be in [0, --num_consumers)");
  }
  if (!position_file.empty() && job_name.empty()) {
    return absl::InvalidArgumentError(
        "--position_file needs --job_name (a resumed run must open the same job)");
  }
  if (!absl::GetFlag(FLAGS_job_owner).empty() && job_name.empty()) {
    return absl::InvalidArgumentError("--job_owner needs --job_name (it says whose job that is)");
  }
  Env* env = Env::Default();
  ASSIGN_OR_RETURN(ClientOptions options, ClientConnectionFromFlags(env));

  // Validate the pipeline locally first: errors name the file, and batched() says how the
  // digest counts rows.
  ASSIGN_OR_RETURN(PipelineRegistries registries, PipelineRegistriesFromFlags());
  ASSIGN_OR_RETURN(PipelineDef def, LoadPipelineFile(env, pipeline_path));
  auto pipeline = Pipeline::Create(def, registries);
  if (!pipeline.ok()) return Annotate(pipeline.status(), absl::StrCat("pipeline ", pipeline_path));
  const bool batched = (*pipeline)->batched();

  RunPosition start;
  const bool resuming = !position_file.empty() && env->FileExists(position_file);
  if (resuming) {
    ASSIGN_OR_RETURN(start, ReadRunPositionFile(env, position_file));
  }
  std::string digests;
  if (resuming && !digest_out.empty() && env->FileExists(digest_out)) {
    ASSIGN_OR_RETURN(digests, ReadFileToString(env, digest_out));
  }
  if (start.epoch >= epochs) {
    std::printf("position file %s: all %lld epochs already read\n", position_file.c_str(),
                static_cast<long long>(epochs));
    return absl::OkStatus();
  }

  options.stall_timeout_ms = absl::GetFlag(FLAGS_stall_timeout_ms);
  options.rpc_timeout_ms = absl::GetFlag(FLAGS_rpc_timeout_ms);
  options.max_outstanding_requests = absl::GetFlag(FLAGS_max_outstanding_requests);
  options.shared_memory = absl::GetFlag(FLAGS_shared_memory);
  options.max_bytes_per_request = absl::GetFlag(FLAGS_max_request_bytes);
  options.granary_binary = SelfExecutablePath();
  options.local_worker_flags =
      absl::StrSplit(absl::GetFlag(FLAGS_local_worker_flags), ' ', absl::SkipEmpty());
  ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Connect(options));
  ASSIGN_OR_RETURN(std::string dataset, client->RegisterPipeline(def));
  JobSpec spec;
  spec.name = job_name;
  spec.owner = absl::GetFlag(FLAGS_job_owner);
  spec.seed = absl::GetFlag(FLAGS_seed);
  spec.num_consumers = absl::GetFlag(FLAGS_num_consumers);
  spec.num_worker_slots = absl::GetFlag(FLAGS_num_worker_slots);
  spec.readers = absl::GetFlag(FLAGS_readers);
  ASSIGN_OR_RETURN(const CachePolicy policy, ParseCachePolicy(absl::GetFlag(FLAGS_cache_policy)));
  spec.cache_policy = policy == CACHE_FULL      ? JobCachePolicy::kFull
                      : policy == CACHE_AT_MARK ? JobCachePolicy::kAtMark
                      : policy == CACHE_AUTO    ? JobCachePolicy::kAuto
                                                : JobCachePolicy::kCompute;
  ASSIGN_OR_RETURN(const Compression compression,
                   CompressionFromName(absl::GetFlag(FLAGS_compression)));
  spec.compression = compression == COMPRESSION_LZ4    ? JobCompression::kLz4
                     : compression == COMPRESSION_ZSTD ? JobCompression::kZstd
                                                       : JobCompression::kNone;
  const std::string autoscale = absl::GetFlag(FLAGS_autoscale);
  if (autoscale == "cachew") {
    spec.autoscale = JobAutoscale::kCachew;
  } else if (autoscale == "model") {
    spec.autoscale = JobAutoscale::kModel;
  } else if (autoscale != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat("--autoscale '", autoscale, "' is none of none, cachew, model"));
  }
  spec.local_workers = absl::GetFlag(FLAGS_local_workers);
  spec.auto_order = absl::GetFlag(FLAGS_auto_order);
  const std::string placement = absl::GetFlag(FLAGS_placement);
  if (placement == "pecan") {
    spec.placement = JobPlacement::kPecan;
  } else if (placement == "auto") {
    spec.placement = JobPlacement::kAuto;
  } else if (placement != "static") {
    return absl::InvalidArgumentError(
        absl::StrCat("--placement '", placement, "' is none of static, pecan, auto"));
  }
  const std::string sharding = absl::GetFlag(FLAGS_sharding);
  if (sharding == "equal") {
    spec.sharding = JobSharding::kEqual;
  } else if (sharding == "dynamic") {
    spec.sharding = JobSharding::kDynamic;
  } else if (sharding != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("--sharding '", sharding, "' is none of auto, dynamic, equal"));
  }
  const absl::StatusOr<JobTail> tail = JobTailFromName(absl::GetFlag(FLAGS_tail));
  if (!tail.ok()) return absl::InvalidArgumentError(absl::StrCat("--", tail.status().message()));
  spec.tail = *tail;
  const std::string remainder = absl::GetFlag(FLAGS_remainder);
  if (remainder == "drop") {
    spec.remainder = JobRemainder::kDrop;
  } else if (remainder == "uneven") {
    spec.remainder = JobRemainder::kUneven;
  } else if (remainder != "pad") {
    return absl::InvalidArgumentError(
        absl::StrCat("--remainder '", remainder, "' is none of pad, drop, uneven"));
  }
  spec.takeover = absl::GetFlag(FLAGS_takeover);
  const bool equal_shares = spec.sharding == JobSharding::kEqual ||
                            (spec.sharding == JobSharding::kAuto && spec.num_consumers > 1);
  ASSIGN_OR_RETURN(std::unique_ptr<Job> job, client->OpenJob(dataset, spec));
  std::printf("granary run: job %lld, dataset %s, consumer %d\n",
              static_cast<long long>(job->job_id()), dataset.c_str(), consumer);
  std::fflush(stdout);

  const absl::Duration step = absl::Milliseconds(absl::GetFlag(FLAGS_step_ms));
  for (int64_t epoch = start.epoch; epoch < epochs; ++epoch) {
    // What earlier processes delivered of this epoch (nothing unless resuming it).
    const RunPosition resumed = epoch == start.epoch ? start : RunPosition{epoch};
    auto reader = job->ReadEpoch(epoch, consumer, resumed.reader);
    if (!reader.ok()) return Annotate(reader.status(), absl::StrCat("epoch ", epoch));
    if (!resumed.reader.empty()) {
      std::printf("epoch %lld: resuming after %lld rows\n", static_cast<long long>(epoch),
                  static_cast<long long>(resumed.rows));
    }
    // The epoch's rows this process read: delivered, and dropped by the remainder rule (the
    // consumers' digests add up to the epoch's); padding repeats a row already counted.
    EpochDigest digest(batched);
    (*reader)->SetDropObserver(
        [&digest](const ReceivedElement& dropped) { digest.Add(dropped.tensors()); });
    // Saves where this epoch stands; consistent because it runs between two Next() calls.
    const auto save = [&](bool sync) -> absl::Status {
      if (position_file.empty()) return absl::OkStatus();
      const EpochStats stats = (*reader)->stats();
      RunPosition now;
      now.epoch = epoch;
      now.rows = resumed.rows + digest.rows();
      now.multiset = resumed.multiset + digest.multiset();
      now.duplicates = resumed.duplicates + stats.duplicates_dropped + stats.recomputed_dropped;
      now.reader = (*reader)->SavePosition();
      return WriteAtomically(env, position_file, FormatRunPosition(now), sync);
    };
    const absl::Time begin = absl::Now();
    absl::Time last_save = begin;
    ReceivedElement element;
    bool end = false;
    ProgressLine progress;
    while (true) {
      const absl::Status status = (*reader)->Next(&element, &end);
      if (!status.ok()) {
        save(/*sync=*/true).IgnoreError();
        return Annotate(status, absl::StrCat("epoch ", epoch));
      }
      if (end) break;
      if (!element.padding()) digest.Add(element.tensors());
      const absl::Time now = absl::Now();
      progress.Update(
          absl::StrFormat("reading epoch %d: %d rows, %.0f rows/s", epoch,
                          resumed.rows + digest.rows(),
                          digest.rows() / std::max(absl::ToDoubleSeconds(now - begin), 1e-9)),
          now);
      if (step > absl::ZeroDuration()) absl::SleepFor(step);
      if (absl::Now() - last_save >= kPositionInterval) {
        RETURN_IF_ERROR(save(/*sync=*/false));
        last_save = absl::Now();
      }
    }
    progress.Clear();
    const double seconds = std::max(absl::ToDoubleSeconds(absl::Now() - begin), 1e-9);
    const EpochStats stats = (*reader)->stats();
    const int64_t dropped = stats.duplicates_dropped + stats.recomputed_dropped;
    std::printf(
        "epoch %lld: %lld elements, %lld rows in %.2f s: %.1f batches/s, %.1f MB/s; dropped "
        "%lld duplicates and %lld recomputed; %lld retries; %lld by shared memory; %lld "
        "normalized here (the trainer-side tail)\n",
        static_cast<long long>(epoch), static_cast<long long>(stats.elements),
        static_cast<long long>(digest.rows()), seconds, stats.elements / seconds,
        stats.payload_bytes / seconds / 1e6, static_cast<long long>(stats.duplicates_dropped),
        static_cast<long long>(stats.recomputed_dropped), static_cast<long long>(stats.retries),
        static_cast<long long>(stats.shared_memory_elements),
        static_cast<long long>(stats.trainer_tail_elements));
    std::fflush(stdout);
    DigestLine line = resumed.reader.empty() ? digest.Line(epoch, dropped)
                                             : ResumedDigestLine(epoch, resumed, digest, dropped);
    if (equal_shares) {
      // Over the whole epoch, earlier processes' part included: from the final position.
      ASSIGN_OR_RETURN(const ClientPosition final_position,
                       DecodePosition((*reader)->SavePosition(), job->job_id(), epoch, consumer));
      int64_t read = 0;
      for (const auto& entry : final_position.next_index()) read += entry.second;
      line.padding = final_position.padded();
      line.remainder_dropped = final_position.dropped();
      line.steps = read - final_position.dropped() + final_position.padded();
    }
    absl::StrAppend(&digests, line.ToJson(), "\n");
    if (!digest_out.empty()) {
      RETURN_IF_ERROR(WriteAtomically(env, digest_out, digests, /*sync=*/true));
    }
    if (!position_file.empty()) {
      RunPosition next;
      next.epoch = epoch + 1;
      RETURN_IF_ERROR(WriteAtomically(env, position_file, FormatRunPosition(next), /*sync=*/true));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int RunCommand(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "granary run --dispatcher HOST:PORT --pipeline P.json --epochs N [--job_name J] [--seed S] "
      "[--consumer C --num_consumers K] [--num_worker_slots T] [--cache_policy C] [--digest_out F] "
      "[--position_file F] [--stall_timeout_ms T] [--rpc_timeout_ms T] [--max_request_bytes B] "
      "[--max_outstanding_requests N] [--noshared_memory] [--compression none|lz4|zstd] "
      "[--tail auto|worker|client] "
      "[--step_ms T] [--plugin lib.so] [--config FILE (the dispatcher, TLS and token files)]");
  ParseCommandFlags(argc, argv);
  const absl::Status status = Run();
  if (!status.ok()) {
    std::fprintf(stderr, "granary run: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace granary
