// User-defined functions: what map, parallel_map and filter call (DESIGN.md §2).
//
// A UDF is registered by name with its parameter specs, a `validate` and a factory. Validating
// a pipeline (PipelineSpec::Create, pipeline/spec/pipeline_spec.h: the dispatcher does it at
// RegisterDataset) calls `validate`; building it (Pipeline::Create, on a worker) then calls the
// factory once with the validated parameters. The Udf it returns is called for every element,
// concurrently from parallel_map's threads, so Udf methods must be thread-safe (they are const).
//
// A UDF's declaration (everything but the factory) can be registered without its
// implementation: registries of declarations validate pipelines but cannot build them
// (pipeline/core/pipeline_registries.h). The built-in UDFs' declarations are in
// pipeline/spec/udf_declarations.h, their implementations in pipeline/udfs/.
//
// Randomness is stateless: a random UDF draws only from StatelessRandom(call.random_key), a key
// derived from (job seed, epoch, element provenance, op index). Recomputing an element anywhere
// therefore yields identical bytes.
//
// Errors say what is wrong with the element (shape, dtype, bad bytes); the op running the UDF
// prefixes the op index, UDF name and the element's origin.
#ifndef GRANARY_PIPELINE_CORE_UDF_H_
#define GRANARY_PIPELINE_CORE_UDF_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pipeline/core/element.h"
#include "pipeline/core/named_registry.h"
#include "pipeline/core/params.h"

namespace granary {

struct UdfCall {
  // Key for StatelessRandom; unique per (seed, epoch, element, op).
  uint64_t random_key = 0;
};

enum class UdfKind {
  kMap,        // for map / parallel_map: transforms an element in place
  kPredicate,  // for filter: decides whether to keep an element
};

class Udf {
 public:
  virtual ~Udf() = default;
  // kMap UDFs override this.
  virtual absl::Status Map(Element& element, const UdfCall& call) const;
  // kPredicate UDFs override this.
  virtual absl::StatusOr<bool> Keep(const Element& element, const UdfCall& call) const;
};

// What a map UDF does to the image at its `index` param, for AutoOrder's commutation rules
// (pipeline/optimizer/auto_order.h). Declared at registration; kOther never moves.
enum class UdfRole {
  kOther,
  // Each output value is a function of the input value at the same position and channel alone,
  // the shape [height, width, channels] stays, and the output dtype is uint8 or float32, which
  // every kPixelSelecting UDF takes (normalize).
  kPixelwise,
  // Each output pixel is a copy of one input pixel, chosen from the image's height and width
  // and the call's random key alone, never its values (random_crop, random_flip); works on any
  // numeric dtype.
  kPixelSelecting,
  // Output pixels interpolate several input pixels (resize, random_resized_crop).
  kResampling,
  kParser,   // records to tensors (parse_example)
  kDecoder,  // encoded bytes to pixels (decode_jpeg, decode_image)
};

struct UdfInfo {
  std::string name;
  UdfKind kind = UdfKind::kMap;
  std::vector<ParamSpec> params;
  // Builds the UDF from its parameters, which have passed `validate`. Null in a declaration
  // (a UDF registered without its implementation): such a UDF validates but cannot run.
  std::function<absl::StatusOr<std::unique_ptr<Udf>>(const Params& params)> factory;
  UdfRole role = UdfRole::kOther;
  // Checks the params beyond their types (ranges, combinations) with errors from
  // params.Invalid, without building the UDF. Null (a plugin that declares none): validating
  // calls the factory instead and drops the UDF it builds, so a plugin's UDF is still checked
  // where only validation runs (the dispatcher loads --plugin libraries too).
  std::function<absl::Status(const Params& params)> validate;
};

// Thread-compatible: register everything first, then share it read-only.
class UdfRegistry : public NamedRegistry<UdfInfo> {
 public:
  UdfRegistry()
      : NamedRegistry(&UdfInfo::name,
                      {"UDF", "UDF",
                       "UDFs are registered by RegisterBuiltinUdfs in "
                       "pipeline/udfs/builtin_udfs.h, or by a plugin (--plugin)"}) {}

  // A registry holding the built-in UDFs (pipeline/udfs/builtin_udfs.h). Defined there, in
  // granary_pipeline_udfs, so that the registry (core) does not depend on the UDFs: a caller
  // links granary_pipeline_udfs (or granary_pipeline, which links it).
  static UdfRegistry WithBuiltins();
};

// Loads a plugin: a shared library exporting
//   extern "C" void GranaryRegisterUdfs(granary::UdfRegistry* registry);
// which is called once with `registry`. Errors name the path and what failed (dlopen, missing
// symbol).
absl::Status LoadUdfPlugin(const std::string& path, UdfRegistry* registry);

}  // namespace granary

// The symbol a plugin exports.
extern "C" {
typedef void (*GranaryRegisterUdfsFn)(granary::UdfRegistry* registry);
}

#endif  // GRANARY_PIPELINE_CORE_UDF_H_
