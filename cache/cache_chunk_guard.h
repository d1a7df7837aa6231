// CacheChunkGuard: how a Get epoch's cache_read source makes sure it serves only what the Put
// epoch wrote (cache/FORMAT.md, "Chunk MAC"; SECURITY.md, cache integrity).
//
// Before serving any element of a manifest chunk, the reader loads the whole chunk file and
// checks it against the manifest's entry (CacheChunk: record count, index sequence) and has the
// guard check its MAC (record by record as they load). A chunk that fails any check — damaged, cut
// short, gone, or forged by someone without the key — is never served: the reader asks the guard to
// Recompute it, and serves what that yields instead (the same elements, computed from the source).
// The worker implements the guard (cache/cache_chunk_recovery.h); without one (a cache directory
// read directly) only count and sequence are checked and a failure is DataLoss.
#ifndef GRANARY_CACHE_CACHE_CHUNK_GUARD_H_
#define GRANARY_CACHE_CACHE_CHUNK_GUARD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/core/source.h"
#include "proto/pipeline.pb.h"

namespace granary {

class CacheChunkGuard {
 public:
  virtual ~CacheChunkGuard() = default;

  // A check of one chunk's MAC, fed the chunk file's records in order as they are read (so the
  // hashing overlaps the read), then finished.
  class MacCheck {
   public:
    virtual ~MacCheck() = default;
    virtual void Add(absl::string_view record) = 0;
    // OK when the records added carry the MAC of the manifest's entry; DataLoss naming the chunk
    // otherwise. Ends the check.
    virtual absl::Status Finish() = 0;
  };
  // The check of the manifest's entry `chunk`.
  virtual std::unique_ptr<MacCheck> StartMacCheck(const CacheChunk& chunk) const = 0;

  // A reader of the chunk's elements from its record `records_done` on, computed from the
  // source (read through context.env, allocated from context.pool) instead of read from the
  // chunk, which failed its checks with `problem`. Errors: the recomputation cannot be had
  // (its error, naming the chunk).
  virtual absl::StatusOr<std::unique_ptr<SplitReader>> Recompute(
      const CacheChunk& chunk, int64_t records_done, const absl::Status& problem,
      const SplitOpenContext& context) = 0;
};

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_CHUNK_GUARD_H_
