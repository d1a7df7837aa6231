// Ops: the transformations after the source (DESIGN.md §2). Each op type is registered by
// name, into an OpRegistry, with its parameter specs, its traits, a validator and a factory that
// wraps an input iterator. An op's declaration (all but the factory) can be registered without
// its implementation: registries of declarations validate pipelines but cannot build them
// (pipeline_registries.h). The built-in ops' declarations are in pipeline/spec/op_declarations.h
// and RegisterBuiltinOps (pipeline/ops/builtin_ops.h) registers them with their factories; the
// cache's are in cache/cache_op_declarations.h and cache/cache_ops.h.
#ifndef GRANARY_PIPELINE_CORE_OP_H_
#define GRANARY_PIPELINE_CORE_OP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pipeline/core/batch_placement.h"
#include "pipeline/core/iterator.h"
#include "pipeline/core/named_registry.h"
#include "pipeline/core/params.h"
#include "pipeline/core/udf.h"

namespace granary {

// What an op factory receives besides its input.
struct OpBuildArgs {
  Params params;
  // The UDF for map, parallel_map and filter; null for other ops.
  std::shared_ptr<const Udf> udf;
  // The op's position in PipelineDef.ops; part of the random key of its UDF calls.
  int op_index = 0;
  // "op 3 (map, udf 'decode_jpeg')": prefix for every error the op reports.
  std::string label;
  IteratorContext ctx;
  // Shared by a map or parallel_map stage and the batch op right after it
  // (batch_placement.h); null otherwise.
  std::shared_ptr<BatchPlacement> placement;
  // In a fused map chain: this op's UDF decodes a JPEG that the next op's UDF crops, and the two
  // run as one partial decode (decode_crop_fusion.h).
  bool decode_crop_with_next = false;
};

struct OpInfo {
  std::string name;
  std::vector<ParamSpec> params;
  // Whether the op calls a UDF, and of which kind.
  bool takes_udf = false;
  UdfKind udf_kind = UdfKind::kMap;
  // Whether the op makes batches (digests count a batch's rows as its elements).
  bool batches = false;
  // Whether the op must directly follow an op that calls a UDF (map, parallel_map, filter):
  // ignore_errors, which continues past the failed elements only those ops can go on after.
  bool follows_udf_op = false;
  // Whether the service inserts the op into a user's pipeline rather than the user writing it
  // (cache_write): it takes no user op index (UserOpIndices), so the ops after it keep their
  // random keys and error labels.
  bool inserted_by_service = false;
  // Checks the op's params beyond their types (ranges, limits: pipeline/core/limits.h) at
  // Pipeline::Create, with errors from params.Invalid; the factory may assume they passed.
  // Null: nothing to check.
  std::function<absl::Status(const Params& params)> validate;
  // Traits by which the stage plan (pipeline/optimizer/stage_plan.h) places the op; the params
  // they get have passed `validate`.
  // Whether the op maps each element alone through its UDF (map, parallel_map): a run of such
  // ops fuses into one stage.
  bool maps_elements = false;
  // The op's thread count, 0 meaning "tuned" (parallel_map's num_threads). Null: the op runs on
  // the thread that pulls from it.
  std::function<absl::StatusOr<int>(const Params& params)> threads;
  // The size of the batches the op makes, when the threads of a parallel stage right before it
  // may place rows into them (batch: BatchPlacement, OpBuildArgs.placement). Null: no placement.
  std::function<int64_t(const Params& params)> placed_batch_size;
  // Whether the params leave a knob of the op to the autotuner (parallel_map's num_threads 0,
  // prefetch's buffer_size 0). Null: never.
  std::function<bool(const Params& params)> autotuned;
  // Builds the op's iterator over `input`; the params have passed `validate`. Null in a
  // declaration: such an op validates but cannot run.
  std::function<absl::StatusOr<std::unique_ptr<Iterator>>(std::unique_ptr<Iterator> input,
                                                          const OpBuildArgs& args)>
      factory;
};

// Base for ops with one input: owns it and saves/restores it under the key prefix "input".
class UnaryOpIterator : public Iterator {
 protected:
  explicit UnaryOpIterator(std::unique_ptr<Iterator> input) : input_(std::move(input)) {}

  absl::Status SaveInput(StateWriter& writer) {
    StateWriter child = writer.Child("input");
    return input_->Save(child);
  }
  absl::Status RestoreInput(const StateReader& reader) {
    return input_->Restore(reader.Child("input"));
  }

  const std::unique_ptr<Iterator> input_;
};

// The ops a pipeline may name, by name. Thread-compatible: register everything first, then
// share it read-only.
class OpRegistry : public NamedRegistry<OpInfo> {
 public:
  OpRegistry()
      : NamedRegistry(&OpInfo::name,
                      {"op", "op",
                       "ops are registered by RegisterBuiltinOps in pipeline/ops/builtin_ops.h "
                       "and RegisterCacheOps in cache/cache_ops.h"}) {}
};

// Map fusion: Pipeline runs each maximal run of consecutive map / parallel_map ops as one stage
// that applies their UDFs in order (each keeping its own op index, random key and error label),
// so an element crosses threads once per run instead of once per op. The output is the same as
// unfused; only thread placement changes.
//
// A stage on the calling thread. With `placement` (a batch op follows), it places the rows it
// makes into their batch (batch_placement.h).
std::unique_ptr<Iterator> NewMapIterator(std::unique_ptr<Iterator> input,
                                         std::vector<OpBuildArgs> chain,
                                         std::shared_ptr<BatchPlacement> placement = nullptr);
// A stage on `num_threads` threads, order-preserving. With `placement` (a batch op follows),
// each thread places the rows it makes into their batch (batch_placement.h).
// With `tuner` (autotuner.h), the stage's parallelism is its knob, between 1 and num_threads.
std::unique_ptr<Iterator> NewParallelMapIterator(
    std::unique_ptr<Iterator> input, std::vector<OpBuildArgs> chain, int num_threads,
    std::shared_ptr<BatchPlacement> placement = nullptr, Autotuner* tuner = nullptr);

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_OP_H_
