// AutoOrder (issue 18, pipeline/optimizer/auto_order.h) on the ResNet-style pipeline written in a
// poor but common order — normalize to float32 before the random crop (224 of 512x512) and the
// flip, examples/imagenet_resnet_normalize_first.json — against the best hand-written order
// (crop, flip, normalize) and AutoOrder's rewrite of each, in process, interleaved epochs, each
// parallel_map at 1 and at 2 threads. Targets: AutoOrder of the poor order ≥ 0.95× the best
// hand-written order and ≥ 1.25× the poor order; AutoOrder of the good order no slower than 2%.
// (The digests of a rewrite equal its input's: tests/auto_order_process_test.cc and
// pipeline/optimizer/auto_order_test.cc.)
//
//   bench/auto_order_bench [--size 512] [--images N] [--repetitions R] [--dir D]
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_report.h"
#include "bench/bench_setup.h"
#include "bench/sample_stats.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "pipeline/optimizer/auto_order.h"

ABSL_FLAG(int64_t, size, 512, "Side of the source images.");
ABSL_FLAG(int64_t, images, 1024, "Images per dataset.");
ABSL_FLAG(int, repetitions, 5, "Epochs measured per configuration.");
ABSL_FLAG(std::string, dir, "/tmp/granary_bench", "Where datasets are generated.");

namespace granary {
namespace {

// `def` with its op running `udf` moved to just before the op running `before`.
PipelineDef MoveBefore(PipelineDef def, const std::string& udf, const std::string& before) {
  auto* ops = def.mutable_ops();
  int from = -1, to = -1;
  for (int i = 0; i < ops->size(); ++i) {
    if (ops->Get(i).udf() == udf) from = i;
    if (ops->Get(i).udf() == before) to = i;
  }
  if (from < 0 || to < 0) return def;
  OpDef moved = ops->Get(from);
  ops->DeleteSubrange(from, 1);
  if (from < to) --to;
  ops->Add();
  for (int i = ops->size() - 1; i > to; --i) ops->SwapElements(i, i - 1);
  *ops->Mutable(to) = std::move(moved);
  return def;
}

absl::Status Run() {
  Env* env = Env::Default();
  const PipelineRegistries registries = PipelineRegistries::WithBuiltins();
  const bool quick = QuickBench();
  const int repetitions = quick ? 1 : absl::GetFlag(FLAGS_repetitions);
  const int64_t images = quick ? 32 : absl::GetFlag(FLAGS_images);
  const int64_t size = quick ? 128 : absl::GetFlag(FLAGS_size);
  BenchReport report("auto_order",
                     absl::StrCat("AutoOrder on the ResNet-style pipeline, normalize written "
                                  "before the crop, ",
                                  size, "x", size, " JPEGs, in process"),
                     repetitions);
  ASSIGN_OR_RETURN(const PipelineDef poor,
                   ImagenetPipeline(env, absl::GetFlag(FLAGS_dir), images, size,
                                    "examples/imagenet_resnet_normalize_first.json"));
  // The best hand-written order: crop, flip, then normalize.
  const PipelineDef good =
      MoveBefore(MoveBefore(poor, "random_crop", "normalize"), "random_flip", "normalize");
  for (int threads : {1, 2}) {
    const PipelineDef poor_t = WithParallelMapThreads(poor, threads);
    const PipelineDef good_t = WithParallelMapThreads(good, threads);
    ASSIGN_OR_RETURN(const PipelineDef poor_auto, AutoOrder(poor_t, registries, env));
    ASSIGN_OR_RETURN(const PipelineDef good_auto, AutoOrder(good_t, registries, env));
    if (threads == 1) {
      report.AddNote(absl::StrCat("AutoOrder of the poor order: ", DescribeOrder(poor_auto),
                                  "; of the good order: ", DescribeOrder(good_auto)));
    }
    const std::vector<NamedPipeline> configs = {{"poor order (normalize first)", poor_t},
                                                {"AutoOrder of the poor order", poor_auto},
                                                {"best hand-written order", good_t},
                                                {"AutoOrder of the good order", good_auto}};
    ASSIGN_OR_RETURN(const std::vector<std::unique_ptr<Pipeline>> pipelines,
                     CreatePipelines(configs, registries));
    ASSIGN_OR_RETURN(const std::vector<EpochRates> rates,
                     InterleaveEpochs(pipelines, repetitions, env));
    const std::string at = absl::StrCat(threads, " thread(s) per parallel_map");
    for (size_t i = 0; i < configs.size(); ++i) {
      report.AddSeries(absl::StrCat(configs[i].name, ", ", at), "images/s", rates[i].rates);
    }
    const auto ratio = [&](int a, int b) {
      return Median(rates[a].rates) / Median(rates[b].rates);
    };
    report.AddHeadline(absl::StrCat(at, ": AutoOrder / best hand-written order"), ratio(1, 2), "x",
                       BenchTarget::AtLeast(0.95));
    report.AddHeadline(absl::StrCat(at, ": AutoOrder / poor order"), ratio(1, 0), "x",
                       BenchTarget::AtLeast(1.25));
    report.AddHeadline(absl::StrCat(at, ": AutoOrder of the good order / good order"), ratio(3, 2),
                       "x", BenchTarget::AtLeast(0.98));
  }
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::BenchMain(argc, argv, "auto_order_bench", granary::Run);
}
