// Reading pipeline files: JSON in protobuf's JSON mapping of PipelineDef, with ${NAME}
// placeholders expanded from the environment first.
//
// Errors name the file and the problem: an unset variable ("pipeline p.json: line 4:
// environment variable GRANARY_DATA is not set"), malformed JSON or an unknown field (protobuf's
// message, which gives the field path).
#ifndef GRANARY_PIPELINE_PIPELINE_LOADER_H_
#define GRANARY_PIPELINE_PIPELINE_LOADER_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "common/env.h"
#include "proto/pipeline.pb.h"

namespace granary {

// Replaces every ${NAME} in `text` by the environment variable NAME. `origin` names the text in
// errors. "$" not followed by "{" is left alone.
absl::StatusOr<std::string> ExpandEnvPlaceholders(absl::string_view text, absl::string_view origin);

// Parses a PipelineDef from JSON (after placeholder expansion). InvalidArgument naming `origin`
// for malformed JSON, an unknown field, no source, or params nested deeper than
// kMaxParamNesting (common/param_nesting.h).
absl::StatusOr<PipelineDef> ParsePipelineJson(absl::string_view text, absl::string_view origin);

// Reads and parses the pipeline file at `path`.
absl::StatusOr<PipelineDef> LoadPipelineFile(Env* env, const std::string& path);

}  // namespace granary

#endif  // GRANARY_PIPELINE_PIPELINE_LOADER_H_
