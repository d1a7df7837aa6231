// The built-in ops with their implementations, one registration per op file: each <Name>Op()
// is the op's declaration (pipeline/spec/op_declarations.h: params, traits, validate) with the
// factory of its iterator. RegisterBuiltinOps registers them all.
#ifndef GRANARY_PIPELINE_OPS_BUILTIN_OPS_H_
#define GRANARY_PIPELINE_OPS_BUILTIN_OPS_H_

#include "pipeline/core/op.h"

namespace granary {

// map, parallel_map, filter, shuffle, batch, take, skip, prefetch, mark, ignore_errors.
void RegisterBuiltinOps(OpRegistry* registry);

OpInfo MapOp();
OpInfo ParallelMapOp();
OpInfo FilterOp();
OpInfo ShuffleOp();
OpInfo BatchOp();
OpInfo TakeOp();
OpInfo SkipOp();
OpInfo PrefetchOp();
OpInfo MarkOp();
OpInfo IgnoreErrorsOp();

}  // namespace granary

#endif  // GRANARY_PIPELINE_OPS_BUILTIN_OPS_H_
