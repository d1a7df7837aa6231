// Fuzz target: the TFRecord reader (pipeline/sources/tfrecord_reader.h) on an uncompressed file. Reads
// every record, then scans the same bytes with ScanTfRecords and skips through them with
// SkipRecord; the three must agree on where the records are. A small max_record_bytes makes
// inputs reach the limit too.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "pipeline/sources/tfrecord_reader.h"

using granary::fuzz::Check;
using granary::fuzz::StringFile;

constexpr int64_t kMaxRecordBytes = 4096;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // Odd-sized short reads exercise the reader's handling of partial reads.
  granary::TfRecordReader reader(std::make_unique<StringFile>(bytes, "fuzz.tfrecord", 7),
                                 "fuzz.tfrecord", 0, kMaxRecordBytes);
  std::vector<int64_t> read_offsets;
  absl::Status read_status;
  while (true) {
    const int64_t at = reader.offset();
    std::string record;
    bool end = false;
    read_status = reader.ReadRecord(&record, &end);
    if (!read_status.ok() || end) break;
    read_offsets.push_back(at);
    Check(static_cast<int64_t>(record.size()) <= kMaxRecordBytes, "records keep the limit");
    Check(reader.offset() ==
              at + granary::kTfRecordFramingBytes + static_cast<int64_t>(record.size()),
          "offset advances by the record's framed size");
  }
  if (!read_status.ok()) {
    // After an error every later call returns it again.
    std::string record;
    bool end = false;
    Check(reader.ReadRecord(&record, &end) == read_status, "errors are sticky");
  }

  std::vector<int64_t> scanned;
  const absl::Status scan_status =
      granary::ScanTfRecords(std::make_unique<StringFile>(bytes, "fuzz.tfrecord"), "fuzz.tfrecord",
                             kMaxRecordBytes, [&](int64_t offset) { scanned.push_back(offset); });
  // The scan checks less than ReadRecord (no data CRC), so when reading succeeds so does the scan,
  // at the same offsets.
  if (read_status.ok()) {
    Check(scan_status.ok(), "a file that reads cleanly scans cleanly");
    Check(scanned == read_offsets, "scan and read agree on the record offsets");
  }

  granary::TfRecordReader skipper(std::make_unique<StringFile>(bytes, "fuzz.tfrecord"),
                                  "fuzz.tfrecord", 0, kMaxRecordBytes);
  for (size_t i = 0; i <= read_offsets.size() + 1; ++i) {
    bool end = false;
    if (!skipper.SkipRecord(&end).ok() || end) break;
  }
  return 0;
}
