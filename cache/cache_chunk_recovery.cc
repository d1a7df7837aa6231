#include "cache/cache_chunk_recovery.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "pipeline/core/split_provider.h"
#include "pipeline/pipeline.h"

namespace granary {
namespace {

// Yields elements [begin, end) of the prefix's stream, computing and dropping those before.
class RecomputedChunkReader : public SplitReader {
 public:
  RecomputedChunkReader(std::unique_ptr<Pipeline> prefix, std::unique_ptr<Iterator> stream,
                        std::string chunk_path, int64_t begin, int64_t end)
      : prefix_(std::move(prefix)),
        stream_(std::move(stream)),
        chunk_path_(std::move(chunk_path)),
        begin_(begin),
        end_(end) {}

  absl::Status Next(Element* out, bool* end) override {
    *end = next_ == end_;
    if (*end) return absl::OkStatus();
    for (;;) {
      bool stream_end = false;
      RETURN_IF_ERROR(Annotate(stream_->GetNext(out, &stream_end),
                               absl::StrCat("recomputing cache chunk ", chunk_path_)));
      if (stream_end) {
        return absl::DataLossError(absl::StrCat("recomputing cache chunk ", chunk_path_,
                                                ": the Put task's stream ends at element ", next_,
                                                ", before the chunk's element ", end_ - 1));
      }
      if (next_++ >= begin_) return absl::OkStatus();
    }
  }

  // Never resumed from an offset: a restore recomputes again (the chunk still fails).
  int64_t offset() const override { return 0; }

 private:
  const std::unique_ptr<Pipeline> prefix_;  // what stream_ runs
  const std::unique_ptr<Iterator> stream_;
  const std::string chunk_path_;
  const int64_t begin_;
  const int64_t end_;
  int64_t next_ = 0;  // index of the stream's next element
};

}  // namespace

std::unique_ptr<CacheChunkGuard::MacCheck> CacheChunkRecovery::StartMacCheck(
    const CacheChunk& chunk) const {
  class Check : public MacCheck {
   public:
    Check(const ChunkMacKey& key, const CacheChunk& chunk)
        : mac_(ChunkMac::ToCheck(key, chunk.task_id(), chunk.first_index(), chunk.mac())),
          path_(chunk.path()),
          expected_(chunk.mac()) {}
    void Add(absl::string_view record) override { mac_.Add(record); }
    absl::Status Finish() override {
      if (ChunkMac::Equal(mac_.Finish(), expected_)) return absl::OkStatus();
      if (expected_.size() != ChunkMac::kMacBytes) {
        return absl::DataLossError(
            absl::StrCat("cache chunk ", path_, ": the manifest's MAC is ", expected_.size(),
                         " bytes, not ", ChunkMac::kMacBytes,
                         " (a chunk of an older cache format, e.g. HMAC-SHA256 MACs "
                         "before AES-GMAC)"));
      }
      return absl::DataLossError(absl::StrCat(
          "cache chunk ", path_,
          ": its MAC is not the manifest's (the file is damaged, or was not written by this "
          "cluster's workers)"));
    }

   private:
    ChunkMac mac_;
    const std::string path_;
    const std::string expected_;
  };
  return std::make_unique<Check>(key_, chunk);
}

absl::StatusOr<std::unique_ptr<SplitReader>> CacheChunkRecovery::Recompute(
    const CacheChunk& chunk, int64_t records_done, const absl::Status& problem,
    const SplitOpenContext& context) {
  LOG(WARNING) << "task " << task_id_ << ": " << problem << "; recomputing the chunk";
  RecomputeCacheChunkRequest request;
  request.set_task_id(task_id_);
  request.set_generation(generation_);
  request.set_chunk_path(chunk.path());
  request.set_problem(std::string(problem.message()));
  const auto failed = [&](const absl::Status& status) {
    return Annotate(status, absl::StrCat("cache chunk ", chunk.path(), " failed its check (",
                                         problem.message(), ") and cannot be recomputed"));
  };
  absl::StatusOr<RecomputeCacheChunkResponse> plan = dispatcher_->RecomputeCacheChunk(request);
  if (!plan.ok()) return failed(plan.status());
  absl::StatusOr<std::unique_ptr<Pipeline>> prefix = Pipeline::Create(plan->prefix(), *registries_);
  if (!prefix.ok()) return failed(prefix.status());
  IteratorContext ctx{context.env, plan->seed(), /*epoch=*/0};
  ctx.cached_prefix_ops = plan->cached_prefix_ops();
  ctx.pool = context.pool;
  std::vector<Split> leased(plan->leased().begin(), plan->leased().end());
  absl::StatusOr<std::unique_ptr<Iterator>> stream =
      (*prefix)->MakeIterator(ctx, std::make_unique<PlannedSplitProvider>(std::move(leased)));
  if (!stream.ok()) return failed(stream.status());
  const CacheChunk& entry = plan->chunk();
  return std::make_unique<RecomputedChunkReader>(*std::move(prefix), *std::move(stream),
                                                 entry.path(), entry.first_index() + records_done,
                                                 entry.first_index() + entry.num_elements());
}

}  // namespace granary
