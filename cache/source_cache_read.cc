// The "cache_read" source (DESIGN.md §5): reads cache chunk files (cache/FORMAT.md) and
// yields the elements cached in them, with their original provenance, so that ops after it draw
// the same randomness as they would have on the computed elements.
//
// The dispatcher inserts it into cache-reading epochs (cache/cache_policy.h) with a split
// plan built from the cache's manifest: one split per chunk, carrying the manifest's entry
// (CacheChunk). Such a chunk is loaded whole and checked before any of it is served
// (cache/cache_chunk_guard.h): its record count, and with the context's guard its MAC; then
// every record's index must follow the chunk's first index. A chunk that fails is recomputed by
// the guard, or without one is DataLoss naming the chunk. Its parameters are those of the file
// sources (pipeline/sources/source_files.h), so a cache directory can also be read directly: {"files":
// ["/cache/<key>/*.chunk"]} — records are then streamed, their indices checked in sequence.
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/async_mac_check.h"
#include "cache/cache_chunk_format.h"
#include "cache/cache_chunk_guard.h"
#include "cache/cache_op_declarations.h"
#include "common/failpoints.h"
#include "common/history_log.h"
#include "common/status_macros.h"
#include "pipeline/core/source.h"
#include "pipeline/sources/source_files.h"
#include "pipeline/sources/tfrecord_reader.h"

namespace granary {
namespace {

constexpr char kType[] = "cache_read";
constexpr char kPerSplit[] = "records_per_split";

// Decodes the record of `file` at `offset` into `element`, whose index must be `expected`
// (-1: any). Errors are DataLoss naming the chunk and offset.
absl::Status DecodeRecord(absl::string_view record, const std::string& file, int64_t offset,
                          int64_t expected, BufferPool* pool, int64_t* index, Element* element) {
  // The cached image passes through: the element is views into it (cache_chunk_format.h).
  const absl::Status decoded = DecodeCachedElement(record, index, element, pool);
  if (!decoded.ok()) {
    return absl::Status(decoded.code(), absl::StrCat("cache chunk ", file, ": record at offset ",
                                                     offset, ": ", decoded.message()));
  }
  if (expected >= 0 && *index != expected) {
    return absl::DataLossError(absl::StrCat("cache chunk ", file, ": record at offset ", offset,
                                            " holds element ", *index, " where ", expected,
                                            " belongs"));
  }
  return absl::OkStatus();
}

// Streams the records of a chunk read directly (no manifest entry).
class StreamedChunkReader : public SplitReader {
 public:
  StreamedChunkReader(const Split& split, OpenedFileSplit opened, int64_t offset, BufferPool* pool)
      : split_(split),
        pool_(pool),
        records_left_(opened.records_left),
        reader_(std::move(opened.file), split.file(), offset) {}

  absl::Status Next(Element* out, bool* end) override {
    if (records_left_ == 0) {
      *end = true;
      return absl::OkStatus();
    }
    const int64_t at = reader_.offset();
    std::string record;
    RETURN_IF_ERROR(reader_.ReadRecord(&record, end));
    if (*end) {
      if (records_left_ > 0) {
        return absl::DataLossError(absl::StrCat("cache chunk ", split_.file(), ": ends at offset ",
                                                at, " with ", records_left_,
                                                " of its records missing"));
      }
      return absl::OkStatus();
    }
    int64_t index = 0;
    RETURN_IF_ERROR(DecodeRecord(record, split_.file(), at, last_index_ >= 0 ? last_index_ + 1 : -1,
                                 pool_, &index, out));
    last_index_ = index;
    if (records_left_ > 0) --records_left_;
    return absl::OkStatus();
  }

  int64_t offset() const override { return reader_.offset(); }

 private:
  const Split split_;
  BufferPool* const pool_;
  int64_t records_left_;
  TfRecordReader reader_;
  int64_t last_index_ = -1;
};

// A manifest chunk's records, loaded whole and checked; served from memory, so what is served
// is what was checked whatever happens to the file meanwhile.
struct LoadedChunk {
  std::deque<std::string> records;  // a deque: a record stays where it is while more are read
  std::vector<int64_t> offsets;  // offsets[i]: where records[i] starts; then the file's end
};

absl::StatusOr<LoadedChunk> LoadChunk(const Params& params, const SplitOpenContext& context,
                                      const Split& split) {
  const CacheChunk& chunk = split.cache_chunk();
  Split whole = split;
  whole.set_begin_offset(0);
  whole.set_num_records(-1);
  ASSIGN_OR_RETURN(OpenedFileSplit opened, OpenFileSplit(params, context.env, whole, 0, 0));
  TfRecordReader reader(std::move(opened.file), split.file(), 0);
  LoadedChunk loaded;  // before `mac`, which hashes its records until it is finished or gone
  const CacheChunkGuard* const guard = context.resources.Get<CacheChunkGuard>();
  const std::unique_ptr<AsyncMacCheck> mac =
      guard != nullptr ? std::make_unique<AsyncMacCheck>(guard->StartMacCheck(chunk)) : nullptr;
  for (;;) {
    loaded.offsets.push_back(reader.offset());
    std::string record;
    bool end = false;
    RETURN_IF_ERROR(reader.ReadRecord(&record, &end));
    if (end) break;
    if (static_cast<int64_t>(loaded.records.size()) == chunk.num_elements()) {
      return absl::DataLossError(absl::StrCat("cache chunk ", split.file(), ": more than ",
                                              chunk.num_elements(),
                                              " records (the manifest's count)"));
    }
    loaded.records.push_back(std::move(record));
    if (mac != nullptr) mac->Add(loaded.records.back());
  }
  if (static_cast<int64_t>(loaded.records.size()) != chunk.num_elements()) {
    return absl::DataLossError(absl::StrCat("cache chunk ", split.file(), ": ",
                                            loaded.records.size(), " records, the manifest says ",
                                            chunk.num_elements()));
  }
  if (mac != nullptr) RETURN_IF_ERROR(mac->Finish());
  return loaded;
}

class CheckedChunkReader : public SplitReader {
 public:
  CheckedChunkReader(const Split& split, LoadedChunk loaded, int64_t records_done, BufferPool* pool)
      : split_(split), pool_(pool), loaded_(std::move(loaded)), next_(records_done) {}

  absl::Status Next(Element* out, bool* end) override {
    *end = next_ == loaded_.records.size();
    if (*end) return absl::OkStatus();
    int64_t index = 0;
    RETURN_IF_ERROR(DecodeRecord(loaded_.records[next_], split_.file(), loaded_.offsets[next_],
                                 split_.cache_chunk().first_index() + static_cast<int64_t>(next_),
                                 pool_, &index, out));
    std::string().swap(loaded_.records[next_]);  // served: its memory goes
    ++next_;
    return next_ < loaded_.records.size() ? HitFailpoint(kGetMidChunk) : absl::OkStatus();
  }

  int64_t offset() const override { return loaded_.offsets[next_]; }

 private:
  const Split split_;
  BufferPool* const pool_;
  LoadedChunk loaded_;
  size_t next_;
};

absl::StatusOr<std::unique_ptr<SplitReader>> OpenManifestChunk(const Params& params,
                                                               const SplitOpenContext& context,
                                                               const Split& split,
                                                               int64_t records_done) {
  if (records_done < 0 || records_done > split.cache_chunk().num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("cache chunk ", split.file(), " has ",
                                                   split.cache_chunk().num_elements(),
                                                   " records, cannot resume after ", records_done));
  }
  absl::StatusOr<LoadedChunk> loaded = LoadChunk(params, context, split);
  GRANARY_HISTORY_RECORD("cache_read", loaded.ok() ? "ok" : "fail", "chunk=", split.file());
  if (loaded.ok()) {
    return std::make_unique<CheckedChunkReader>(split, *std::move(loaded), records_done,
                                                context.pool);
  }
  CacheChunkGuard* const guard = context.resources.Get<CacheChunkGuard>();
  if (guard == nullptr) return loaded.status();
  return guard->Recompute(split.cache_chunk(), records_done, loaded.status(), context);
}

}  // namespace

SourceInfo CacheReadSource() {
  SourceInfo info;
  info.type = kType;
  info.params = FileSourceParams(kPerSplit);
  info.keeps_provenance = true;
  info.reads_cache_chunks = true;
  info.validate = [](const Params& params, Env* env) {
    return ValidateFileSource(params, env, kType, kPerSplit);
  };
  info.enumerate = [](const Params& params, Env* env) {
    // Chunks are Granary's own uncompressed files: a length beyond the file is reported as
    // truncated before it is allocated, so their records need no limit of their own.
    return EnumerateFileSplits(params, env, kType, kPerSplit, kUnlimitedRecordBytes, ScanTfRecords);
  };
  info.open = [](const Params& params, const SplitOpenContext& context, const Split& split,
                 int64_t offset,
                 int64_t records_done) -> absl::StatusOr<std::unique_ptr<SplitReader>> {
    if (split.has_cache_chunk()) return OpenManifestChunk(params, context, split, records_done);
    ASSIGN_OR_RETURN(OpenedFileSplit opened,
                     OpenFileSplit(params, context.env, split, offset, records_done));
    return std::make_unique<StreamedChunkReader>(split, std::move(opened), offset, context.pool);
  };
  return info;
}

}  // namespace granary
