// HighWaterFile: the journal's high-water mark kept beside RocksDB, outside its WAL.
//
// RocksDB alone does not notice the loss of its newest WAL (deleted, truncated to a record
// boundary, restored from an older copy): the records in it and the high-water key written with
// them vanish together. This small file, `<journal dir>/GRANARY-HIGH-WATER`, remembers the last
// sequence number the journal acknowledged and the number of the WAL it was writing, so that
// recovery can tell "nothing more was written" from "acknowledged records are gone"
// (journal/FORMAT.md, "The high-water file").
//
// Layout: two 32-byte slots, each
//     magic "GRNRYHW1" (8) | seq (8, big-endian) | wal_number (8, big-endian) | XXH64 of the first
//     24 bytes, seed 0 (8, big-endian)
// Updates overwrite the slots alternately in place (no allocation, so they cannot fail for lack
// of space), and the reader takes the valid slot with the larger seq: a write torn by a crash
// leaves the other slot, which holds an older (smaller) mark. The file only ever claims less
// than RocksDB holds, never more, unless acknowledged records were lost.
//
// Not thread-safe: the journal calls it from one writer at a time.
#ifndef GRANARY_JOURNAL_HIGH_WATER_FILE_H_
#define GRANARY_JOURNAL_HIGH_WATER_FILE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/sync_ledger.h"

namespace granary {

struct HighWater {
  uint64_t seq = 0;         // Records 1..seq were acknowledged.
  uint64_t wal_number = 0;  // RocksDB's WAL when the mark was last anchored (0 = unknown).
};

class HighWaterFile {
 public:
  static constexpr int64_t kSlotSize = 32;
  static constexpr int64_t kFileSize = 2 * kSlotSize;

  // Reads the file at `path`. nullopt if it does not exist.
  // Errors: DataLoss naming `path` if it has the wrong size or neither slot verifies; other
  // codes for I/O errors.
  static absl::StatusOr<std::optional<HighWater>> Read(const std::string& path);

  // Makes `path` hold `mark` in both slots, durably (fsynced; a new file is written beside it
  // and renamed into place, then the directory is fsynced), and opens it for Update. An
  // existing file of the right size is rewritten in place (so this works on a full disk).
  // With `ledger` (power-loss tests, common/sync_ledger.h), this file and Update record their
  // creations, renames and syncs in it (a synced in-place write as its whole content); an
  // error appending to it fails the call. `ledger` must outlive the file.
  static absl::StatusOr<std::unique_ptr<HighWaterFile>> Anchor(const std::string& path,
                                                               const HighWater& mark,
                                                               SyncLedger* ledger = nullptr);

  ~HighWaterFile();
  HighWaterFile(const HighWaterFile&) = delete;
  HighWaterFile& operator=(const HighWaterFile&) = delete;

  // Overwrites the older slot with `mark`; with `sync`, also fdatasyncs. Without `sync` the
  // update is in the page cache: visible to any later Read on this machine, durable once the
  // kernel writes it back. REQUIRES: mark.seq >= every earlier mark's seq.
  absl::Status Update(const HighWater& mark, bool sync);

  // Whether the file was deleted (its last name unlinked) since it was opened: fstat's
  // st_nlink is 0. One system call, cheap enough for every batch.
  bool Unlinked() const;

  const std::string& path() const { return path_; }

 private:
  HighWaterFile(std::string path, int fd, std::string content, SyncLedger* ledger)
      : path_(std::move(path)), fd_(fd), content_(std::move(content)), ledger_(ledger) {}

  const std::string path_;
  const int fd_;
  std::string content_;  // what the file holds (both slots), for the ledger
  SyncLedger* const ledger_;
  int next_slot_ = 0;
};

}  // namespace granary

#endif  // GRANARY_JOURNAL_HIGH_WATER_FILE_H_
