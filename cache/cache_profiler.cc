#include "cache/cache_profiler.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/cache_policy.h"
#include "cache/cache_put.h"
#include "common/status_macros.h"
#include "pipeline/pipeline.h"
#include "pipeline/core/split_provider.h"

namespace granary {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Reads `chunks` in order: one split each, as a Get epoch's plan.
std::unique_ptr<SplitProvider> ChunkReader(const std::vector<CacheChunk>& chunks) {
  const google::protobuf::RepeatedPtrField<CacheChunk> manifest(chunks.begin(), chunks.end());
  return std::make_unique<PlannedSplitProvider>(ChunkSplits(manifest));
}

// One stage's run: its elements written as a probe chunk (unless `put` is null).
struct StageRun {
  double seconds = 0;  // Pulling the elements, without writing them.
  double write_seconds = 0;
  int64_t elements = 0;
  int64_t element_bytes = 0;
  std::vector<CacheChunk> chunks;
};

class Profiler {
 public:
  Profiler(const CacheProfileRequest& request, const CacheProfilerOptions& options)
      : request_(request), options_(options), def_(request.pipeline()) {}

  ~Profiler() { DeleteProbe(); }

  absl::StatusOr<CacheProfile> Run() {
    RETURN_IF_ERROR(CheckCandidates());
    ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> source, Create(CachedPrefix(def_, 0), "the source"));
    ASSIGN_OR_RETURN(std::vector<Split> splits, source->EnumerateSplits(options_.env));
    const std::vector<Split> plan = source->PlanEpoch(splits, request_.seed(), 0);

    // Stage 0: the sample, read from the source.
    ASSIGN_OR_RETURN(StageRun sample,
                     RunStage(*source, std::make_unique<PlannedSplitProvider>(plan), 0,
                              request_.sample_records()));
    if (sample.elements == 0) {
      return absl::FailedPreconditionError("cache profile: the source yields no record");
    }
    CacheProfile profile;
    profile.set_sample_records(sample.elements);
    ASSIGN_OR_RETURN(const int64_t estimated, EstimateRecords(plan, sample));
    profile.set_estimated_records(std::max(estimated, sample.elements));

    int previous_point = 0;
    std::vector<CacheChunk> previous_chunks = sample.chunks;
    ASSIGN_OR_RETURN(double previous_read, ReadBack(0, previous_chunks));
    double pending_seconds = sample.seconds;  // The source's time joins the first segment.
    for (const int point : request_.cache_points()) {
      ASSIGN_OR_RETURN(StageRun stage,
                       RunSegment(previous_point, point, previous_chunks, /*write=*/true));
      CachePointProfile* measured = profile.add_points();
      measured->set_cache_point(point);
      measured->set_segment_seconds(pending_seconds + std::max(0.0, stage.seconds - previous_read));
      measured->set_elements(stage.elements);
      for (const CacheChunk& chunk : stage.chunks)
        measured->set_bytes(measured->bytes() + chunk.bytes());
      measured->set_write_seconds(stage.write_seconds);
      ASSIGN_OR_RETURN(previous_read, ReadBack(point, stage.chunks));
      measured->set_read_seconds(previous_read);
      pending_seconds = 0;
      previous_point = point;
      previous_chunks = std::move(stage.chunks);
    }
    if (previous_point < def_.ops_size()) {
      ASSIGN_OR_RETURN(StageRun tail, RunSegment(previous_point, def_.ops_size(), previous_chunks,
                                                 /*write=*/false));
      profile.set_tail_seconds(pending_seconds + std::max(0.0, tail.seconds - previous_read));
    }
    return profile;
  }

 private:
  absl::Status CheckCandidates() const {
    const std::vector<int> marks = MarkPoints(def_);
    const std::set<int> allowed(marks.begin(), marks.end());
    int previous = 0;
    for (const int point : request_.cache_points()) {
      if (!allowed.count(point) || point <= previous) {
        return absl::InvalidArgumentError(
            absl::StrCat("cache profile: candidate point ", point,
                         " is not a mark's, or not after the previous candidate ", previous));
      }
      previous = point;
    }
    if (request_.sample_records() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cache profile: sample of ", request_.sample_records(), " records"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<Pipeline>> Create(const PipelineDef& def,
                                                   const std::string& what) const {
    auto pipeline = Pipeline::Create(def, *options_.registries);
    if (!pipeline.ok()) {
      return Annotate(pipeline.status(), absl::StrCat("cache profile, ", what));
    }
    return pipeline;
  }

  std::string ChunkDir(int point) const {
    return absl::StrCat(request_.probe_dir(), "/point-", point);
  }

  // Runs `pipeline` over `provider` as epoch 0 (at most `limit` elements when positive) and
  // writes what it yields as probe chunks of `point` when `point` is not negative.
  absl::StatusOr<StageRun> RunStage(const Pipeline& pipeline,
                                    std::unique_ptr<SplitProvider> provider, int point,
                                    int64_t limit) {
    IteratorContext ctx{options_.env, request_.seed(), 0};
    ctx.cached_prefix_ops = def_.ops_size();  // Everything as epoch 0, like the pinned prefix.
    std::unique_ptr<CachePut> put;
    if (point >= 0) {
      CachePutOptions put_options;
      put_options.env = options_.env;
      put_options.dir = ChunkDir(point);
      put_options.task_id = point;
      put = std::make_unique<CachePut>(put_options);
    }
    StageRun run;
    const Clock::time_point start = Clock::now();
    ASSIGN_OR_RETURN(std::unique_ptr<Iterator> it, pipeline.MakeIterator(ctx, std::move(provider)));
    while (limit <= 0 || run.elements < limit) {
      if (options_.stop != nullptr && options_.stop->HasBeenNotified()) {
        return absl::CancelledError("cache profile: stopped");
      }
      Element element;
      bool end = false;
      RETURN_IF_ERROR(it->GetNext(&element, &end));
      if (end) break;
      run.element_bytes += element.ByteSize();
      if (put != nullptr) {
        const Clock::time_point write_start = Clock::now();
        RETURN_IF_ERROR(put->Append(run.elements, element));
        run.write_seconds += SecondsSince(write_start);
      }
      ++run.elements;
    }
    it.reset();  // Its threads stop before the clock does.
    run.seconds = SecondsSince(start) - run.write_seconds;
    if (put != nullptr) {
      const Clock::time_point finish_start = Clock::now();
      ASSIGN_OR_RETURN(run.chunks, put->Finish());
      run.write_seconds += SecondsSince(finish_start);
    }
    return run;
  }

  // The ops [from, to) over the probe chunks of point `from`, written as those of `to`.
  absl::StatusOr<StageRun> RunSegment(int from, int to, const std::vector<CacheChunk>& input,
                                      bool write) {
    ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> segment,
                     Create(ReadingFromCache(CachedPrefix(def_, to), from, ChunkDir(from)),
                            absl::StrCat("ops ", from, " to ", to)));
    return RunStage(*segment, ChunkReader(input), write ? to : -1, 0);
  }

  // Seconds to read the probe chunks of `point` through cache_read alone.
  absl::StatusOr<double> ReadBack(int point, const std::vector<CacheChunk>& chunks) {
    ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> reader,
                     Create(ReadingFromCache(CachedPrefix(def_, point), point, ChunkDir(point)),
                            absl::StrCat("reading point ", point)));
    ASSIGN_OR_RETURN(StageRun run, RunStage(*reader, ChunkReader(chunks), -1, 0));
    return run.seconds;
  }

  // The epoch's records: the plan's counts when every split has one, else its files' bytes over
  // the sample's bytes per record.
  absl::StatusOr<int64_t> EstimateRecords(const std::vector<Split>& plan,
                                          const StageRun& sample) const {
    int64_t counted = 0;
    bool all_counted = true;
    std::set<std::string> files;
    for (const Split& split : plan) {
      counted += split.num_records();
      all_counted &= split.num_records() > 0;
      files.insert(split.file());
    }
    if (all_counted) return counted;
    uint64_t file_bytes = 0;
    for (const std::string& file : files) {
      ASSIGN_OR_RETURN(const uint64_t size, options_.env->GetFileSize(file));
      file_bytes += size;
    }
    const double bytes_per_record =
        std::max(1.0, static_cast<double>(sample.element_bytes) / sample.elements);
    return static_cast<int64_t>(static_cast<double>(file_bytes) / bytes_per_record);
  }

  // Best effort: the probe's chunk files and directories.
  void DeleteProbe() {
    std::vector<int> points = {0};
    points.insert(points.end(), request_.cache_points().begin(), request_.cache_points().end());
    for (const int point : points) {
      const std::string dir = ChunkDir(point);
      absl::StatusOr<std::vector<std::string>> names = options_.env->GetChildren(dir);
      if (!names.ok()) continue;
      for (const std::string& name : *names) {
        options_.env->DeleteFile(absl::StrCat(dir, "/", name)).IgnoreError();
      }
      options_.env->DeleteDir(dir).IgnoreError();
    }
    options_.env->DeleteDir(request_.probe_dir()).IgnoreError();
  }

  const CacheProfileRequest& request_;
  const CacheProfilerOptions options_;
  const PipelineDef& def_;
};

}  // namespace

absl::StatusOr<CacheProfile> ProfileCachePoints(const CacheProfileRequest& request,
                                                const CacheProfilerOptions& options) {
  Profiler profiler(request, options);
  return profiler.Run();
}

}  // namespace granary
