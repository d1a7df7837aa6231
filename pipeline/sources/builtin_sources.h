// The built-in sources, one registration per source file. RegisterBuiltinSources registers them
// all.
#ifndef GRANARY_PIPELINE_SOURCES_BUILTIN_SOURCES_H_
#define GRANARY_PIPELINE_SOURCES_BUILTIN_SOURCES_H_

#include "pipeline/core/source.h"

namespace granary {

// range, tfrecord, text_lines.
void RegisterBuiltinSources(SourceRegistry* registry);

SourceInfo RangeSource();
SourceInfo TfRecordSource();
SourceInfo TextLinesSource();

}  // namespace granary

#endif  // GRANARY_PIPELINE_SOURCES_BUILTIN_SOURCES_H_
