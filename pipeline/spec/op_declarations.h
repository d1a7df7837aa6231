// The built-in ops' declarations: for each op, its name, param specs, traits and `validate`
// (OpInfo, pipeline/core/op.h) — everything but the factory that builds its iterator. This is
// what validating a pipeline needs (PipelineSpec, pipeline_spec.h), without linking an op
// iterator: the dispatcher's registries hold these (builtin_declarations.h). Each op's
// implementation (pipeline/ops/op_<name>.cc) adds its factory to its declaration, so an op's
// params are declared and checked here only.
#ifndef GRANARY_PIPELINE_SPEC_OP_DECLARATIONS_H_
#define GRANARY_PIPELINE_SPEC_OP_DECLARATIONS_H_

#include "absl/status/statusor.h"
#include "pipeline/core/op.h"
#include "pipeline/core/params.h"

namespace granary {

// The declarations of map, parallel_map, filter, shuffle, batch, take, skip, prefetch, mark
// and ignore_errors, without factories (RegisterBuiltinOps, pipeline/ops/builtin_ops.h,
// registers them with theirs).
void RegisterBuiltinOpDeclarations(OpRegistry* registry);

OpInfo MapOpDeclaration();
OpInfo ParallelMapOpDeclaration();
OpInfo FilterOpDeclaration();
OpInfo ShuffleOpDeclaration();
OpInfo BatchOpDeclaration();
OpInfo TakeOpDeclaration();
OpInfo SkipOpDeclaration();
OpInfo PrefetchOpDeclaration();
OpInfo MarkOpDeclaration();
OpInfo IgnoreErrorsOpDeclaration();

// parallel_map's validated num_threads param (default: the number of cores; 0: tuned).
absl::StatusOr<int> ParallelMapThreads(const Params& params);
// prefetch's buffer_size param (default 2; 0: tuned).
int64_t PrefetchBufferSize(const Params& params);

}  // namespace granary

#endif  // GRANARY_PIPELINE_SPEC_OP_DECLARATIONS_H_
