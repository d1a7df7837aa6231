// PipelineSpec validates with declarations alone exactly as with the full registries, and a
// Pipeline refuses to build from declarations, naming what has no implementation.
#include "pipeline/spec/pipeline_spec.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/pipeline.h"
#include "pipeline/pipeline_loader.h"
#include "pipeline/spec/builtin_declarations.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

PipelineDef Def(const std::string& json) {
  absl::StatusOr<PipelineDef> def = ParsePipelineJson(json, "spec test.json");
  EXPECT_TRUE(def.ok()) << def.status();
  return def.ok() ? *def : PipelineDef();
}

// A pipeline over range with one op.
std::string WithOp(const std::string& op) {
  return absl::StrCat(R"({"source": {"type": "range", "params": {"stop": 10}}, "ops": [)", op,
                      "]}");
}

absl::Status SpecStatus(const std::string& json, const PipelineRegistries& registries) {
  return PipelineSpec::Create(Def(json), registries).status();
}

// One bad param of each kind of check: the op's and UDF's own checks, the registry's, the
// spec's structural ones. Each must be refused with the declarations as with the full
// registries, in the same words.
TEST(PipelineSpecTest, DeclarationsRefuseWhatTheFullRegistriesRefuseInTheSameWords) {
  const PipelineRegistries declared = BuiltinDeclarations();
  const PipelineRegistries full = PipelineRegistries::WithBuiltins();
  const std::pair<std::string, std::string> cases[] = {
      {WithOp(R"({"op": "map", "udf": "random_crp"})"),
       "op 0 (map, udf 'random_crp'): unknown UDF"},
      {WithOp(R"({"op": "filter", "udf": "add", "udfParams": {"value": 1}})"),
       "UDF 'add' is a map function"},
      {WithOp(R"({"op": "batch", "params": {"batch_size": 0}})"),
       "'batch_size' must be at least 1"},
      {WithOp(R"({"op": "parallel_map", "udf": "add", "params": {"num_threads": 300},
                  "udfParams": {"value": 1}})"),
       "'num_threads' must be in [1, 256]"},
      {WithOp(R"({"op": "ignore_errors"})"), "must directly follow a map"},
      {WithOp(R"({"op": "map", "udf": "random_crop", "udfParams": {"fraction": 2}})"),
       "'fraction' must be in (0, 1], got 2"},
      {WithOp(R"({"op": "map", "udf": "random_resized_crop",
                  "udfParams": {"height": 8, "width": 8, "scale": [0.5, 2]}})"),
       "max must be at most 1"},
      {WithOp(R"({"op": "map", "udf": "decode_jpeg", "udfParams": {"channels": 4}})"),
       "'channels' must be 0 (as encoded), 1 or 3, got 4"},
      {WithOp(R"({"op": "map", "udf": "decode_image", "udfParams": {"index": -1}})"),
       "'index' must be >= 0"},
      {WithOp(R"({"op": "map", "udf": "resize", "udfParams": {"height": 0, "width": 8}})"),
       "'height'"},
      {WithOp(R"({"op": "map", "udf": "random_flip", "udfParams": {"probability": 1.5}})"),
       "'probability' must be in [0, 1]"},
      {WithOp(R"({"op": "map", "udf": "normalize", "udfParams": {"std": [1, 0]}})"),
       "'std' entry 1 is 0"},
      {WithOp(R"({"op": "map", "udf": "cast", "udfParams": {"dtype": "string"}})"),
       "cast converts only between numeric dtypes"},
      {WithOp(R"({"op": "map", "udf": "parse_example",
                  "udfParams": {"keys": ["a"], "dtypes": ["int32"]}})"),
       "'dtypes' entry 0 ('int32', for key 'a')"},
      {WithOp(R"({"op": "filter", "udf": "modulo", "udfParams": {"modulus": 0}})"),
       "'modulus' must be positive"},
      {WithOp(R"({"op": "map", "udf": "fill_bytes", "udfParams": {"bytes": 0}})"),
       "'bytes' must be in [1, 2^31]"},
      {WithOp(R"({"op": "map", "udf": "simulate_cost", "udfParams": {"us_per_element": -1}})"),
       "'us_per_element' must be in [0, 10^7]"},
      {WithOp(R"({"op": "map", "udf": "string_length", "udfParams": {"index": -2}})"),
       "'index' must be >= 0"},
  };
  for (const auto& [json, expected] : cases) {
    const absl::Status with_declarations = SpecStatus(json, declared);
    EXPECT_TRUE(absl::IsInvalidArgument(with_declarations)) << json << ": " << with_declarations;
    EXPECT_THAT(std::string(with_declarations.message()), HasSubstr(expected)) << json;
    EXPECT_EQ(with_declarations, SpecStatus(json, full)) << json;
    // And a Pipeline, built on the spec, refuses it with the same error.
    EXPECT_EQ(with_declarations, Pipeline::Create(Def(json), full).status()) << json;
  }
}

TEST(PipelineSpecTest, DeclarationsAcceptWhatTheFullRegistriesAccept) {
  const std::string json = R"({"source": {"type": "range", "params": {"stop": 10,
      "elements_per_split": 3, "shuffle_splits": true}}, "ops": [
      {"op": "parallel_map", "udf": "add", "params": {"num_threads": 0}, "udfParams": {"value": 1}},
      {"op": "ignore_errors"}, {"op": "filter", "udf": "modulo", "udfParams": {"modulus": 2}},
      {"op": "shuffle", "params": {"buffer_size": 4}}, {"op": "batch", "params": {"batch_size": 2}},
      {"op": "prefetch", "params": {"buffer_size": 0}}]})";
  absl::StatusOr<PipelineSpec> spec = PipelineSpec::Create(Def(json), BuiltinDeclarations());
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<Pipeline>> pipeline =
      Pipeline::Create(Def(json), PipelineRegistries::WithBuiltins());
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  EXPECT_EQ(spec->Fingerprint(), (*pipeline)->Fingerprint());
  EXPECT_TRUE(spec->batched());
  EXPECT_TRUE(spec->autotuned()) << "parallel_map num_threads 0";
  ASSERT_EQ(spec->ops().size(), 6u);
  EXPECT_EQ(spec->ops()[2].label, "op 2 (filter, udf 'modulo')");
  EXPECT_EQ(spec->ops()[2].udf->name, "modulo");
  absl::StatusOr<std::vector<Split>> splits = spec->EnumerateSplits(Env::Default());
  ASSERT_TRUE(splits.ok()) << splits.status();
  ASSERT_EQ(splits->size(), 4u) << "10 elements, 3 per split";
  std::vector<uint64_t> spec_plan, pipeline_plan;
  for (const Split& split : spec->PlanEpoch(*splits, 7, 2)) spec_plan.push_back(split.id());
  for (const Split& split : (*pipeline)->PlanEpoch(*splits, 7, 2)) {
    pipeline_plan.push_back(split.id());
  }
  EXPECT_EQ(spec_plan, pipeline_plan);
}

// The two registrations of each built-in op and UDF — its declaration and its declaration with
// the implementation — are the same entries, in the same order, but for the factories.
TEST(PipelineSpecTest, DeclarationsDeclareEveryBuiltinAsItsImplementationRegistersIt) {
  const PipelineRegistries declared = BuiltinDeclarations();
  const PipelineRegistries full = PipelineRegistries::WithBuiltins();
  ASSERT_EQ(declared.ops.Names(), full.ops.Names());
  ASSERT_EQ(declared.udfs.Names(), full.udfs.Names());
  ASSERT_EQ(declared.sources.Names(), full.sources.Names());
  for (const std::string& name : full.ops.Names()) {
    const OpInfo& d = *declared.ops.Find(name);
    const OpInfo& f = *full.ops.Find(name);
    EXPECT_EQ(d.params.size(), f.params.size()) << name;
    EXPECT_EQ(d.takes_udf, f.takes_udf) << name;
    EXPECT_EQ(d.udf_kind, f.udf_kind) << name;
    EXPECT_EQ(d.batches, f.batches) << name;
    EXPECT_EQ(d.maps_elements, f.maps_elements) << name;
    EXPECT_EQ(static_cast<bool>(d.validate), static_cast<bool>(f.validate)) << name;
    EXPECT_FALSE(d.factory) << name << "'s declaration has no factory";
    EXPECT_TRUE(f.factory) << name;
  }
  for (const std::string& name : full.udfs.Names()) {
    const UdfInfo& d = *declared.udfs.Find(name);
    const UdfInfo& f = *full.udfs.Find(name);
    EXPECT_EQ(d.kind, f.kind) << name;
    EXPECT_EQ(d.role, f.role) << name;
    EXPECT_EQ(d.params.size(), f.params.size()) << name;
    EXPECT_TRUE(d.validate) << name << " validates without its implementation";
    EXPECT_TRUE(f.validate) << name;
    EXPECT_FALSE(d.factory) << name << "'s declaration has no factory";
    EXPECT_TRUE(f.factory) << name;
  }
}

TEST(PipelineSpecTest, PipelineFromDeclarationsNamesWhatHasNoImplementation) {
  const PipelineRegistries declared = BuiltinDeclarations();
  const absl::Status op =
      Pipeline::Create(Def(WithOp(R"({"op": "batch", "params": {"batch_size": 2}})")), declared)
          .status();
  EXPECT_TRUE(absl::IsFailedPrecondition(op)) << op;
  EXPECT_THAT(std::string(op.message()),
              HasSubstr("op 0 (batch): op 'batch' is only declared, without its implementation"));

  // An op with its implementation whose UDF has none.
  PipelineRegistries mixed = BuiltinDeclarations();
  mixed.ops = PipelineRegistries::WithBuiltins().ops;
  const absl::Status udf =
      Pipeline::Create(Def(WithOp(R"({"op": "map", "udf": "add", "udfParams": {"value": 1}})")),
                       mixed)
          .status();
  EXPECT_TRUE(absl::IsFailedPrecondition(udf)) << udf;
  EXPECT_THAT(std::string(udf.message()),
              HasSubstr("op 0 (map, udf 'add'): UDF 'add' is only declared"));

  // A source without its readers.
  PipelineRegistries unopenable = PipelineRegistries::WithBuiltins();
  unopenable.sources = SourceRegistry();
  SourceInfo range = *BuiltinDeclarations().sources.Find("range");
  range.open = nullptr;
  ASSERT_TRUE(unopenable.sources.Register(range).ok());
  const absl::Status source =
      Pipeline::Create(Def(WithOp(R"({"op": "take", "params": {"count": 1}})")), unopenable)
          .status();
  EXPECT_TRUE(absl::IsFailedPrecondition(source)) << source;
  EXPECT_THAT(std::string(source.message()), HasSubstr("source 'range' is only declared"));
}

// A UDF that declares no validate (a plugin's) is checked by building it; the error its
// factory gives is the spec's.
TEST(PipelineSpecTest, UdfWithoutValidateIsCheckedByItsFactory) {
  PipelineRegistries registries = BuiltinDeclarations();
  int built = 0;
  UdfInfo plugin;
  plugin.name = "jitter";
  plugin.params = {{"amplitude", ParamType::kInt, true}};
  plugin.factory = [&built](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
    ++built;
    if (p.GetInt("amplitude") < 0) return p.Invalid("amplitude", "must not be negative");
    return std::make_unique<Udf>();
  };
  ASSERT_TRUE(registries.udfs.Register(plugin).ok());

  const absl::Status bad = SpecStatus(
      WithOp(R"({"op": "map", "udf": "jitter", "udfParams": {"amplitude": -1}})"), registries);
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
  EXPECT_THAT(std::string(bad.message()),
              HasSubstr("op 0 (map, udf 'jitter'): param 'amplitude' must not be negative"));
  EXPECT_EQ(built, 1);
  EXPECT_TRUE(SpecStatus(WithOp(R"({"op": "map", "udf": "jitter", "udfParams": {"amplitude": 2}})"),
                         registries)
                  .ok());
  EXPECT_EQ(built, 2);
}

}  // namespace
}  // namespace granary
