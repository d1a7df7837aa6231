// PipelineRegistries: everything a pipeline may name — its source type, its ops and their UDFs —
// as one value that whatever validates or builds pipelines is handed (PipelineSpec::Create,
// Pipeline::Create, AutoOrder, a worker, the dispatcher). Each registry is an instance, filled
// by registration functions: the built-ins' (RegisterBuiltinSources, RegisterBuiltinOps,
// RegisterBuiltinUdfs), a subsystem's (RegisterCacheOps, cache/cache_ops.h) and plugins'
// (LoadUdfPlugin, udf.h).
//
// Registries come in two strengths:
//   - full (WithBuiltins, cache/cache_ops.h's PipelineRegistriesWithCache): every entry has its
//     implementation (an op's and a UDF's factory, a source's open); what Pipeline runs;
//   - declarations (BuiltinDeclarations, pipeline/spec/builtin_declarations.h; the cache's
//     PipelineDeclarationsWithCache, cache/cache_op_declarations.h): the built-in ops and UDFs
//     without factories, enough for PipelineSpec to validate a pipeline and list its splits,
//     linking no op iterator, UDF or image codec. The dispatcher holds these.
//
// Thread-compatible: register everything first, then share it read-only.
#ifndef GRANARY_PIPELINE_CORE_PIPELINE_REGISTRIES_H_
#define GRANARY_PIPELINE_CORE_PIPELINE_REGISTRIES_H_

#include "pipeline/core/op.h"
#include "pipeline/core/source.h"
#include "pipeline/core/udf.h"

namespace granary {

struct PipelineRegistries {
  // Registries holding the built-in sources, ops and UDFs with their implementations. Defined
  // in pipeline/pipeline_registries.cc, in granary_pipeline (the assembled pipeline, which links
  // every implementation): a caller links granary_pipeline.
  static PipelineRegistries WithBuiltins();

  SourceRegistry sources;
  OpRegistry ops;
  UdfRegistry udfs;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_PIPELINE_REGISTRIES_H_
