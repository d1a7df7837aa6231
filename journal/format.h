// The journal's on-disk key and value encoding (journal/FORMAT.md is the prose version).
//
// Keys (all in RocksDB's default column family, bytewise order):
//   'f'                          format marker; payload kFormatMarker
//   'h'                          high-water mark; payload = 8-byte big-endian last sequence number
//   'r' + 8-byte big-endian seq  record `seq` (seq >= 1); payload = the caller's bytes
//   's' + 8-byte big-endian seq  snapshot covering records 1..seq; payload = the caller's bytes
//   'w'                          the high-water file exists; payload kHighWaterFileName
// Values: 8-byte big-endian XXH64(key bytes followed by payload bytes, seed 0), then payload.
//
// Pure functions, thread-safe.
#ifndef GRANARY_JOURNAL_FORMAT_H_
#define GRANARY_JOURNAL_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace granary::journal_format {

inline constexpr char kFormatKey[] = "f";
inline constexpr char kHighWaterKey[] = "h";
inline constexpr char kRecordPrefix = 'r';
inline constexpr char kSnapshotPrefix = 's';
inline constexpr char kFormatMarker[] = "granary-journal-v1";
// The high-water file beside RocksDB's files (journal/high_water_file.h), and the key saying
// that it exists (payload: the file's name); journals older than the file have neither.
inline constexpr char kHighWaterFileName[] = "GRANARY-HIGH-WATER";
inline constexpr char kHighWaterFileKey[] = "w";
// Left in a journal directory that a running journal found deleted (journal/FORMAT.md).
inline constexpr char kLostMarkerFileName[] = "GRANARY-JOURNAL-LOST";
inline constexpr size_t kSeqKeySize = 9;  // Prefix byte + 8-byte sequence number.
inline constexpr size_t kChecksumSize = 8;

// 8-byte big-endian encoding of `value`, and its inverse. REQUIRES (decode): bytes.size() == 8.
std::string EncodeU64(uint64_t value);
uint64_t DecodeU64(absl::string_view bytes);

// `prefix` + EncodeU64(seq).
std::string SeqKey(char prefix, uint64_t seq);
inline std::string RecordKey(uint64_t seq) { return SeqKey(kRecordPrefix, seq); }
inline std::string SnapshotKey(uint64_t seq) { return SeqKey(kSnapshotPrefix, seq); }

// If `key` is `prefix` followed by exactly 8 bytes, returns the sequence number; otherwise
// nullopt.
std::optional<uint64_t> ParseSeqKey(char prefix, absl::string_view key);

// The 8-byte checksum header of the value stored under `key` for `payload`.
std::string ValueHeader(absl::string_view key, absl::string_view payload);
// The value stored under `key` for `payload`: ValueHeader(key, payload) followed by payload.
std::string EncodeValue(absl::string_view key, absl::string_view payload);

// Verifies `value` stored under `key` and returns its payload (a view into `value`).
// Errors: DataLoss "value of N bytes is shorter than its 8-byte checksum" or "checksum
// mismatch" (no context; callers annotate with the journal dir and sequence number).
absl::StatusOr<absl::string_view> DecodeValue(absl::string_view key, absl::string_view value);

}  // namespace granary::journal_format

#endif  // GRANARY_JOURNAL_FORMAT_H_
