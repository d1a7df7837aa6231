// Sources: what stands at the head of a pipeline (DESIGN.md §2).
//
// Each source type is registered by name, into a SourceRegistry, with its parameter specs, its
// traits and the functions below. Validating a pipeline and enumerating its splits
// (PipelineSpec, pipeline/spec/pipeline_spec.h: the dispatcher) use `validate` and `enumerate`;
// only running it (Pipeline, on a worker) uses `open`. The built-in sources are registered by
// RegisterBuiltinSources (builtin_sources.h), the cache's by RegisterCacheOps
// (cache/cache_ops.h).
//
// A source enumerates its splits (a file, or a range of records within a file) and opens a
// SplitReader that yields the records of one split. The generic SourceIterator (built by
// Pipeline) pulls splits from a SplitProvider and records from SplitReaders, and stamps each
// element with its provenance (split id, record index).
#ifndef GRANARY_PIPELINE_CORE_SOURCE_H_
#define GRANARY_PIPELINE_CORE_SOURCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "pipeline/core/element.h"
#include "pipeline/core/named_registry.h"
#include "pipeline/core/params.h"
#include "pipeline/core/run_resources.h"
#include "transport/buffer_pool.h"
#include "proto/pipeline.pb.h"

namespace granary {

// Yields the records of one split, in order. Thread-compatible.
class SplitReader {
 public:
  virtual ~SplitReader() = default;
  // Reads the next record into out->tensors, or sets *end. Errors name the file and offset.
  virtual absl::Status Next(Element* out, bool* end) = 0;
  // Where the next record starts, as OpenSplit's `offset` takes it to resume here.
  virtual int64_t offset() const = 0;
};

// What a source's readers run with.
struct SplitOpenContext {
  Env* env = Env::Default();
  // A reader that yields elements in their wire image (cache_read) allocates them from here.
  BufferPool* pool = BufferPool::Default();
  // What the run lends its source by type (IteratorContext::resources): a Get epoch's check of
  // manifest chunks and their recomputation (cache_read's CacheChunkGuard).
  RunResources resources;
};

struct SourceInfo {
  std::string type;
  std::vector<ParamSpec> params;
  // Checks the params beyond their types at Pipeline::Create (errors from params.Invalid), and
  // when `env` is not null also that the files they name exist (each pattern matches a file;
  // NotFound as `enumerate` words it). Null: nothing to check.
  std::function<absl::Status(const Params& params, Env* env)> validate;
  // Lists the source's splits in a stable order, ids 0, 1, 2, ... Errors name the file or
  // pattern at fault (a pattern matching no file is NotFound).
  std::function<absl::StatusOr<std::vector<Split>>(const Params& params, Env* env)> enumerate;
  // Opens `split` positioned at byte `offset` (a value from SplitReader::offset(), or
  // split.begin_offset()), at which `records_done` records of the split have been read.
  std::function<absl::StatusOr<std::unique_ptr<SplitReader>>(
      const Params& params, const SplitOpenContext& context, const Split& split, int64_t offset,
      int64_t records_done)>
      open;
  // Whether the source's readers set each element's provenance themselves (cache_read: the
  // element's original split and record) instead of SourceIterator stamping the split's.
  bool keeps_provenance = false;
  // Whether the source reads the chunks of a Put epoch (cache_read): a worker runs it with the
  // cache's read hooks, which check each chunk and recompute one that fails.
  bool reads_cache_chunks = false;
};

// The sources a pipeline may name, by type. Thread-compatible: register everything first, then
// share it read-only.
class SourceRegistry : public NamedRegistry<SourceInfo> {
 public:
  SourceRegistry()
      : NamedRegistry(&SourceInfo::type,
                      {"source", "type",
                       "sources are registered by RegisterBuiltinSources in "
                       "pipeline/sources/builtin_sources.h and RegisterCacheOps in "
                       "cache/cache_ops.h"}) {}
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_SOURCE_H_
