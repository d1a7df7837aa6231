// The sizes a pipeline implies are checked against pipeline/core/limits.h at Pipeline::Create, and
// an allocation that still fails inside an op or UDF is an error of that element, never a dead
// process (issue 13, defect 2).
#include "pipeline/core/limits.h"

#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/core/allocation_guard.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/local_runner.h"
#include "pipeline/pipeline.h"
#include "pipeline/pipeline_loader.h"
#include "pipeline/udfs/udf_test_util.h"

namespace granary {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kRange[] = R"("source": {"type": "range", "params": {"stop": 4}})";

absl::StatusOr<std::unique_ptr<Pipeline>> Create(const std::string& ops,
                                                  const PipelineRegistries& registries) {
  auto def = ParsePipelineJson(absl::StrCat("{", kRange, R"(, "ops": [)", ops, "]}"), "p.json");
  if (!def.ok()) return def.status();
  return Pipeline::Create(*def, registries);
}

absl::Status CreateStatus(const std::string& ops) {
  return Create(ops, PipelineRegistries::WithBuiltins()).status();
}

absl::Status RunStatus(const std::string& ops, const PipelineRegistries& registries) {
  auto pipeline = Create(ops, registries);
  if (!pipeline.ok()) return pipeline.status();
  return RunEpochInProcess(**pipeline, 0, 0, Env::Default()).status();
}

TEST(PipelineLimitsTest, HugeBatchSizeIsRefusedByCreate) {
  const absl::Status s = CreateStatus(R"({"op": "batch", "params": {"batch_size": 1e11}})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("op 0 (batch): param 'batch_size' is 100000000000, above "
                                     "the limit 1048576 (kMaxBatchSize"));
  EXPECT_TRUE(CreateStatus(R"({"op": "batch", "params": {"batch_size": 1048576}})").ok());
}

TEST(PipelineLimitsTest, HugeImageSizesAreRefusedByCreate) {
  const struct {
    const char* op;
    const char* message;
  } cases[] = {
      {R"({"op": "map", "udf": "resize", "udfParams": {"height": 1e6, "width": 1e6}})",
       "op 1 (map, udf 'resize'): param 'height' is 1000000, above the limit 65536 (kMaxImageSide"},
      {R"({"op": "map", "udf": "resize", "udfParams": {"height": 224, "width": 1e6}})",
       "op 1 (map, udf 'resize'): param 'width' is 1000000, above the limit 65536 (kMaxImageSide"},
      {R"({"op": "map", "udf": "resize", "udfParams": {"height": 65536, "width": 65536}})",
       "op 1 (map, udf 'resize'): param 'height' * 'width' is 4294967296, above the limit "
       "268435456 (kMaxImagePixels"},
      {R"({"op": "parallel_map", "udf": "random_crop",
           "udfParams": {"height": 1e6, "width": 1e6}})",
       "op 1 (parallel_map, udf 'random_crop'): param 'height' is 1000000, above the limit 65536"},
  };
  for (const auto& c : cases) {
    const absl::Status s = CreateStatus(
        absl::StrCat(R"({"op": "map", "udf": "fill_bytes", "udfParams": {"bytes": 3}}, )", c.op));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.op << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.op;
  }
}

// A resize whose output (height * width * channels * dtype size) exceeds kMaxElementBytes
// fails that element with ResourceExhausted before allocating.
TEST(PipelineLimitsTest, ResizeAboveTheElementLimitIsResourceExhausted) {
  auto udf =
      udf_test::MakeUdf({RegisterResizeUdf, "resize"}, R"({"height": 16384, "width": 16384})");
  ASSERT_TRUE(udf.ok()) << udf.status();
  Element f = udf_test::MakeElement({Tensor(DT_FLOAT, {2, 2, 3})});
  const absl::Status s = (*udf)->Map(f, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr("float32[16384,16384,3]"), HasSubstr("3 GiB"),
                                 HasSubstr("kMaxElementBytes")));
}

// A UDF that throws what a failed allocation throws.
class ThrowingUdf : public Udf {
 public:
  explicit ThrowingUdf(bool length_error) : length_error_(length_error) {}
  absl::Status Map(Element& element, const UdfCall&) const override {
    if (element.record == 2) {
      if (length_error_) {
        std::vector<char> v;
        v.reserve(v.max_size() + 1);  // Throws std::length_error.
      }
      throw std::bad_alloc();
    }
    return absl::OkStatus();
  }

 private:
  const bool length_error_;
};

PipelineRegistries RegistriesWithThrowingUdfs() {
  PipelineRegistries registries = PipelineRegistries::WithBuiltins();
  for (const bool length_error : {false, true}) {
    EXPECT_TRUE(
        registries.udfs.Register({length_error ? "throw_length_error" : "throw_bad_alloc",
                       UdfKind::kMap,
                       {},
                       [length_error](const Params&) -> absl::StatusOr<std::unique_ptr<Udf>> {
                         return std::make_unique<ThrowingUdf>(length_error);
                       }})
            .ok());
  }
  return registries;
}

TEST(PipelineLimitsTest, FailedAllocationInAUdfIsResourceExhaustedForThatElement) {
  const PipelineRegistries registries = RegistriesWithThrowingUdfs();
  for (const char* op : {"map", "parallel_map"}) {
    for (const char* udf : {"throw_bad_alloc", "throw_length_error"}) {
      const absl::Status s =
          RunStatus(absl::StrCat(R"({"op": ")", op, R"(", "udf": ")", udf, R"("})"), registries);
      EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << op << " " << udf << ": " << s;
      EXPECT_THAT(
          s.message(),
          AllOf(HasSubstr(absl::StrCat("op 0 (", op, ", udf '", udf, "') at split 0 record 2")),
                HasSubstr("out of memory")))
          << op << " " << udf;
    }
  }
}

// An op's own allocation failing (not its UDF's) is caught at the op's boundary and named.
TEST(PipelineLimitsTest, FailedAllocationInAnOpIsResourceExhaustedNamingTheOp) {
  class ThrowingIterator : public Iterator {
   public:
    absl::Status GetNext(Element*, bool*) override { throw std::bad_alloc(); }
    absl::Status Save(StateWriter&) override { return absl::OkStatus(); }
    absl::Status Restore(const StateReader&) override { return absl::OkStatus(); }
  };
  std::unique_ptr<Iterator> it = GuardAllocations(
      GuardAllocations(std::make_unique<ThrowingIterator>(), "op 3 (shuffle)"), "op 4 (batch)");
  Element e;
  bool end = false;
  const absl::Status s = it->GetNext(&e, &end);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(s.message(), "op 3 (shuffle): out of memory: an allocation failed (std::bad_alloc)");
}

TEST(PipelineLimitsTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(512), "512 bytes");
  EXPECT_EQ(HumanBytes(int64_t{1} << 31), "2 GiB");
  EXPECT_EQ(HumanBytes(3 * (int64_t{1} << 20)), "3 MiB");
}

}  // namespace
}  // namespace granary
