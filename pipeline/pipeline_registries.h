// PipelineRegistries: everything a pipeline may name — its source type, its ops and their UDFs —
// as one value that whatever builds pipelines is handed (Pipeline::Create, AutoOrder, a worker,
// the dispatcher). Each registry is an instance, filled by registration functions: the
// built-ins' (RegisterBuiltinSources, RegisterBuiltinOps, RegisterBuiltinUdfs), a subsystem's
// (RegisterCacheOps, cache/cache_ops.h) and plugins' (LoadUdfPlugin, udf.h).
//
// Thread-compatible: register everything first, then share it read-only.
#ifndef GRANARY_PIPELINE_PIPELINE_REGISTRIES_H_
#define GRANARY_PIPELINE_PIPELINE_REGISTRIES_H_

#include "pipeline/core/op.h"
#include "pipeline/core/source.h"
#include "pipeline/core/udf.h"

namespace granary {

struct PipelineRegistries {
  // Registries holding the built-in sources, ops and UDFs.
  static PipelineRegistries WithBuiltins();

  SourceRegistry sources;
  OpRegistry ops;
  UdfRegistry udfs;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_PIPELINE_REGISTRIES_H_
