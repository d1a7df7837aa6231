// The "cache_read" source (DESIGN.md §5): reads cache chunk files (checkpoint/FORMAT.md) and
// yields the elements cached in them, with their original provenance, so that ops after it draw
// the same randomness as they would have on the computed elements.
//
// The dispatcher inserts it into cache-reading epochs (pipeline/cache_policy.h) with a split
// plan built from the cache's manifest: one split per chunk, carrying its record count and
// checksum (non-zero), which the reader checks (a chunk with fewer or more records than its split
// says, a record out of sequence, or a chunk read from start to end whose checksum differs, is
// DataLoss naming the chunk). Its parameters are those of the file sources
// (pipeline/source_files.h), so a cache directory can also be read directly: {"files":
// ["/cache/<key>/*.chunk"]}.
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "common/failpoints.h"
#include "pipeline/cache_chunk_format.h"
#include "pipeline/source.h"
#include "pipeline/source_files.h"
#include "pipeline/tfrecord_reader.h"
#include "proto/cache.pb.h"

namespace granary {
namespace {

constexpr char kType[] = "cache_read";
constexpr char kPerSplit[] = "records_per_split";

class CacheChunkReader : public SplitReader {
 public:
  CacheChunkReader(const Split& split, OpenedFileSplit opened, int64_t offset, int64_t records_done,
                   BufferPool* pool)
      : split_(split),
        pool_(pool),
        records_left_(opened.records_left),
        from_start_(offset == 0 && records_done == 0),
        reader_(std::move(opened.file), split.file(), offset) {}

  absl::Status Next(Element* out, bool* end) override {
    const int64_t at = reader_.offset();
    std::string record;
    if (records_left_ == 0) {
      // The split's records are read. A manifest chunk (it has a checksum) must end here.
      if (split_.checksum() != 0) {
        bool file_end = false;
        RETURN_IF_ERROR(reader_.SkipRecord(&file_end));
        if (!file_end) {
          return absl::DataLossError(absl::StrCat("cache chunk ", split_.file(), ": more than ",
                                                  split_.num_records(),
                                                  " records (the manifest's count)"));
        }
        RETURN_IF_ERROR(CheckChecksum());
      }
      *end = true;
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(reader_.ReadRecord(&record, end));
    if (*end) {
      if (records_left_ > 0) {
        return absl::DataLossError(absl::StrCat("cache chunk ", split_.file(), ": ends at offset ",
                                                at, " with ", records_left_,
                                                " of its records missing"));
      }
      return CheckChecksum();
    }
    int64_t index = 0;
    Element element;
    // The cached image passes through: the element is views into it (cache_chunk_format.h).
    const absl::Status decoded = DecodeCachedElement(record, &index, &element, pool_);
    if (!decoded.ok()) {
      return absl::Status(decoded.code(),
                          absl::StrCat("cache chunk ", split_.file(), ": record at offset ", at,
                                       ": ", decoded.message()));
    }
    if (last_index_ >= 0 && index != last_index_ + 1) {
      return absl::DataLossError(absl::StrCat("cache chunk ", split_.file(), ": record at offset ",
                                              at, " holds element ", index, " after ",
                                              last_index_));
    }
    last_index_ = index;
    checksum_ = ChainChunkChecksum(checksum_, record);
    *out = std::move(element);
    if (records_left_ > 0) --records_left_;
    return records_left_ != 0 ? HitFailpoint(kGetMidChunk) : absl::OkStatus();
  }

  int64_t offset() const override { return reader_.offset(); }

 private:
  // At the chunk's end: its checksum must be the split's, if it was read from its start.
  absl::Status CheckChecksum() const {
    if (!from_start_ || split_.checksum() == 0 || checksum_ == split_.checksum()) {
      return absl::OkStatus();
    }
    return absl::DataLossError(absl::StrCat("cache chunk ", split_.file(), ": checksum ",
                                            HashToHex(checksum_), ", manifest says ",
                                            HashToHex(split_.checksum())));
  }

  const Split split_;
  BufferPool* const pool_;
  int64_t records_left_;
  const bool from_start_;
  TfRecordReader reader_;
  int64_t last_index_ = -1;
  uint64_t checksum_ = 0;
};

}  // namespace

SourceInfo CacheReadSource() {
  SourceInfo info;
  info.type = kType;
  info.params = FileSourceParams(kPerSplit);
  info.keeps_provenance = true;
  info.validate = [](const Params& params, Env* env) {
    return ValidateFileSource(params, env, kType, kPerSplit);
  };
  info.enumerate = [](const Params& params, Env* env) {
    return EnumerateFileSplits(params, env, kType, kPerSplit, ScanTfRecords);
  };
  info.open = [](const Params& params, Env* env, const Split& split, int64_t offset,
                 int64_t records_done,
                 BufferPool* pool) -> absl::StatusOr<std::unique_ptr<SplitReader>> {
    ASSIGN_OR_RETURN(OpenedFileSplit opened,
                     OpenFileSplit(params, env, split, offset, records_done));
    return std::make_unique<CacheChunkReader>(split, std::move(opened), offset, records_done,
                                              pool);
  };
  return info;
}

}  // namespace granary
