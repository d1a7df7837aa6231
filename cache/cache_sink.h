// CacheSink: where a cache_write op puts the elements flowing through it (DESIGN.md §5).
//
// The pipeline only hands elements over and saves/restores the sink with its own state; the
// worker's implementation (cache/cache_put.h) writes them to chunk files and commits those
// with the task's checkpoints. Called from the iterator's thread only.
#ifndef GRANARY_CACHE_CACHE_SINK_H_
#define GRANARY_CACHE_CACHE_SINK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "pipeline/core/element.h"
#include "pipeline/core/iterator_state.h"

namespace granary {

class CacheSink {
 public:
  virtual ~CacheSink() = default;
  // Writes the element with index `index`: 0, 1, 2, ... in order from a fresh start, or from
  // the index restored.
  virtual absl::Status Append(int64_t index, const Element& element) = 0;
  // Part of the iterator's Save: seals what was appended so far into complete chunks and writes
  // the list of chunks sealed up to now.
  virtual absl::Status Save(StateWriter& writer) = 0;
  // Part of the iterator's Restore: makes the chunks the saved state lists durable, and
  // discards anything written after that state was saved.
  virtual absl::Status Restore(const StateReader& reader) = 0;
};

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_SINK_H_
