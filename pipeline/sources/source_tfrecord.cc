// The "tfrecord" source: TFRecord files (plain or GZIP), one element per record holding the
// record's bytes as a DT_STRING scalar. Parameters: see pipeline/sources/source_files.h, with
// "records_per_split" as the split size, and "max_record_bytes".
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/sources/builtin_sources.h"
#include "pipeline/core/source.h"
#include "pipeline/sources/source_files.h"
#include "pipeline/sources/tfrecord_reader.h"

namespace granary {
namespace {

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
  return FileSourceInfo({.type = "tfrecord",
                         .per_split_param = "records_per_split",
                         .scan = ScanTfRecords,
                         .make_reader = MakeFileSplitReader<TfRecordSplitReader>});
}

}  // namespace granary
