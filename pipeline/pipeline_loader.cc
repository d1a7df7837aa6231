#include "pipeline/pipeline_loader.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/param_nesting.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/type_resolver.h"
#include "google/protobuf/util/type_resolver_util.h"

namespace granary {

absl::StatusOr<std::string> ExpandEnvPlaceholders(absl::string_view text,
                                                  absl::string_view origin) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  // The line of `counted` (1-based), advanced as placeholders are found: counting from the
  // start for each one would make expansion quadratic in the text's size.
  size_t line = 1;
  size_t counted = 0;
  while (pos < text.size()) {
    const size_t start = text.find("${", pos);
    if (start == absl::string_view::npos) {
      absl::StrAppend(&out, text.substr(pos));
      break;
    }
    absl::StrAppend(&out, text.substr(pos, start - pos));
    line += std::count(text.begin() + counted, text.begin() + start, '\n');
    counted = start;
    const size_t close = text.find('}', start + 2);
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": line ", line, ": unterminated ${ placeholder"));
    }
    const std::string name(text.substr(start + 2, close - start - 2));
    if (name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": line ", line, ": empty ${}"));
    }
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": line ", line, ": environment variable ", name, " is not set"));
    }
    out.append(value);
    pos = close + 1;
  }
  return out;
}

absl::StatusOr<PipelineDef> ParsePipelineJson(absl::string_view text, absl::string_view origin) {
  ASSIGN_OR_RETURN(std::string expanded, ExpandEnvPlaceholders(text, origin));
  // What JsonStringToMessage does, but for the recursion limit of the last step: it parses the
  // transcoded bytes 100 message levels deep at most — params nested about 32 levels — and then
  // says only "JSON transcoder produced invalid protobuf output". Parsed deeper here, a pipeline
  // nested too deep is refused by CheckParamNesting below, which says where and why.
  static google::protobuf::util::TypeResolver* const resolver =
      google::protobuf::util::NewTypeResolverForDescriptorPool(
          "type.googleapis.com", google::protobuf::DescriptorPool::generated_pool());
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  std::string binary;
  const auto status = google::protobuf::util::JsonToBinaryString(
      resolver, "type.googleapis.com/" + PipelineDef::descriptor()->full_name(), expanded, &binary,
      options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": not a valid pipeline: ", std::string(status.message())));
  }
  PipelineDef def;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(binary.data()),
                                            static_cast<int>(binary.size()));
  // The JSON parser nests at most 100 levels, each at most 3 message levels.
  in.SetRecursionLimit(400);
  if (!def.ParseFromCodedStream(&in)) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": not a valid pipeline"));
  }
  if (!def.has_source()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": pipeline has no source"));
  }
  RETURN_IF_ERROR(Annotate(CheckParamNesting(def), origin));
  return def;
}

absl::StatusOr<PipelineDef> LoadPipelineFile(Env* env, const std::string& path) {
  auto text = ReadFileToString(env, path);
  if (!text.ok()) return Annotate(text.status(), "pipeline file");
  return ParsePipelineJson(*text, absl::StrCat("pipeline ", path));
}

}  // namespace granary
