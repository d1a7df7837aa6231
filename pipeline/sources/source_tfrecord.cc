// The "tfrecord" source: TFRecord files (plain or GZIP), one element per record holding the
// record's bytes as a DT_STRING scalar. Parameters: see pipeline/sources/source_files.h, with
// "records_per_split" as the split size, and "max_record_bytes".
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "pipeline/core/source.h"
#include "pipeline/sources/source_files.h"
#include "pipeline/sources/tfrecord_reader.h"

namespace granary {
namespace {

constexpr char kType[] = "tfrecord";
constexpr char kPerSplit[] = "records_per_split";

class TfRecordSplitReader : public FileSplitReader {
 public:
  TfRecordSplitReader(const Split& split, OpenedFileSplit opened, int64_t offset,
                      int64_t max_record_bytes)
      : FileSplitReader(split, opened.records_left),
        reader_(std::move(opened.file), split.file(), offset, max_record_bytes) {}

  int64_t offset() const override { return reader_.offset(); }

 protected:
  absl::Status ReadRecord(std::string* record, bool* end) override {
    return reader_.ReadRecord(record, end);
  }

 private:
  TfRecordReader reader_;
};

}  // namespace

SourceInfo TfRecordSource() {
  SourceInfo info;
  info.type = kType;
  info.params = RecordSourceParams(kPerSplit);
  info.validate = [](const Params& params, Env* env) {
    RETURN_IF_ERROR(ValidateFileSource(params, env, kType, kPerSplit));
    return MaxRecordBytes(params).status();
  };
  info.enumerate = [](const Params& params, Env* env) -> absl::StatusOr<std::vector<Split>> {
    ASSIGN_OR_RETURN(const int64_t max_record_bytes, MaxRecordBytes(params));
    return EnumerateFileSplits(params, env, kType, kPerSplit, max_record_bytes, ScanTfRecords);
  };
  info.open = [](const Params& params, const SplitOpenContext& context, const Split& split,
                 int64_t offset,
                 int64_t records_done) -> absl::StatusOr<std::unique_ptr<SplitReader>> {
    ASSIGN_OR_RETURN(const int64_t max_record_bytes, MaxRecordBytes(params));
    ASSIGN_OR_RETURN(OpenedFileSplit opened,
                     OpenFileSplit(params, context.env, split, offset, records_done));
    return std::make_unique<TfRecordSplitReader>(split, std::move(opened), offset,
                                                 max_record_bytes);
  };
  return info;
}

}  // namespace granary
