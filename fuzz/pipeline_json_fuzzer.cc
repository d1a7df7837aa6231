// Fuzz target: the pipeline file loader (pipeline/pipeline_loader.h): ${VAR} expansion, the
// JSON mapping of PipelineDef, and then Pipeline::Create's validation of what it parsed (which
// reads no file). GRANARY_FUZZ_DIR and GRANARY_FUZZ_EMPTY are set, so placeholders naming them
// expand; any other name is an unset variable.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "fuzz/fuzz_util.h"
#include "pipeline/pipeline.h"
#include "pipeline/pipeline_loader.h"
#include "pipeline/core/pipeline_registries.h"
#include "pipeline/core/udf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const granary::PipelineRegistries* const registries = [] {
    setenv("GRANARY_FUZZ_DIR", "/nonexistent/granary-fuzz", 1);
    setenv("GRANARY_FUZZ_EMPTY", "", 1);
    return new granary::PipelineRegistries(granary::PipelineRegistries::WithBuiltins());
  }();
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::string> expanded = granary::ExpandEnvPlaceholders(text, "fuzz.json");
  if (expanded.ok() && text.find("${") == absl::string_view::npos) {
    granary::fuzz::Check(*expanded == text, "text without placeholders expands to itself");
  }
  absl::StatusOr<granary::PipelineDef> def = granary::ParsePipelineJson(text, "fuzz.json");
  if (!def.ok()) return 0;
  (void)granary::Pipeline::Create(*def, *registries);
  return 0;
}
