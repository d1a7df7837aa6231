// The decode-crop fusion (issue 18, pipeline/udfs/decode_crop_fusion.h): the standard ImageNet
// training pipeline (examples/imagenet_random_resized_crop.json: parse, decode_jpeg,
// random_resized_crop to 224x224, flip, normalize, batch) on 512x512 JPEGs, in process, with
// the fusion off and on, and the decode-only ceiling (the pipeline up to decode_jpeg, every
// image decoded whole) — interleaved epochs in one run, each parallel_map at 1 thread and at 2.
// Targets: fused >= 1.5x unfused, and above the decode-only ceiling.
//
// And the opt-in approximate mode (random_resized_crop's dct_scaling: large windows decoded at
// 1/2, 1/4 or 1/8 in the DCT domain): its rate against unfused, and how far its crops are from
// the exact ones — the mean absolute difference, in uint8 levels, between the 224x224 crops of
// one epoch of parse + decode + crop run both ways with the same seed.
//
//   bench/decode_crop_bench [--size 512] [--images N] [--repetitions R] [--dir D]
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_report.h"
#include "bench/bench_setup.h"
#include "bench/sample_stats.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "pipeline/local_runner.h"

ABSL_FLAG(int64_t, size, 512, "Side of the source images.");
ABSL_FLAG(int64_t, images, 1024, "Images per dataset.");
ABSL_FLAG(int, repetitions, 5, "Epochs measured per configuration.");
ABSL_FLAG(std::string, dir, "/tmp/granary_bench", "Where datasets are generated.");

namespace granary {
namespace {

// `def` with random_resized_crop's dct_scaling on.
PipelineDef WithDctScaling(PipelineDef def) {
  for (auto& op : *def.mutable_ops()) {
    if (op.udf() == "random_resized_crop") {
      (*op.mutable_udf_params()->mutable_fields())["dct_scaling"].set_bool_value(true);
    }
  }
  return def;
}

// The images (tensor 0) of one epoch of `pipeline`, in order.
absl::StatusOr<std::vector<Tensor>> EpochImages(const Pipeline& pipeline, Env* env) {
  std::vector<Tensor> images;
  EpochRunOptions options;
  options.digest = false;
  options.on_element = [&images](const Element& e) { images.push_back(e.tensors[0]); };
  RETURN_IF_ERROR(RunEpochInProcess(pipeline, 1, 0, env, options).status());
  return images;
}

// The mean absolute difference, in uint8 levels, between same-shaped uint8 images.
absl::StatusOr<double> MeanAbsoluteDifference(const std::vector<Tensor>& a,
                                              const std::vector<Tensor>& b) {
  if (a.size() != b.size()) {
    return absl::InternalError(absl::StrCat(a.size(), " images against ", b.size()));
  }
  double sum = 0;
  int64_t values = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype() != DT_UINT8 || a[i].shape() != b[i].shape()) {
      return absl::InternalError(absl::StrCat("image ", i, ": ", a[i].DebugString(), " against ",
                                              b[i].DebugString()));
    }
    const uint8_t* pa = a[i].data<uint8_t>();
    const uint8_t* pb = b[i].data<uint8_t>();
    for (int64_t k = 0; k < a[i].num_elements(); ++k) sum += std::abs(int{pa[k]} - int{pb[k]});
    values += a[i].num_elements();
  }
  return values == 0 ? 0.0 : sum / static_cast<double>(values);
}

absl::Status Run() {
  Env* env = Env::Default();
  const PipelineRegistries registries = PipelineRegistries::WithBuiltins();
  const bool quick = QuickBench();
  const int repetitions = quick ? 1 : absl::GetFlag(FLAGS_repetitions);
  const int64_t images = quick ? 32 : absl::GetFlag(FLAGS_images);
  const int64_t size = quick ? 128 : absl::GetFlag(FLAGS_size);
  BenchReport report("decode_crop",
                     absl::StrCat("decode_jpeg + random_resized_crop(224) fused vs unfused on ",
                                  size, "x", size, " JPEGs, in process"),
                     repetitions);
  ASSIGN_OR_RETURN(const PipelineDef def,
                   ImagenetPipeline(env, absl::GetFlag(FLAGS_dir), images, size,
                                    "examples/imagenet_random_resized_crop.json"));
  for (int threads : {1, 2}) {
    const PipelineDef with_threads = WithParallelMapThreads(def, threads);
    PipelineOptions unfused;
    unfused.fuse_decode_crop = false;
    const std::vector<NamedPipeline> configs = {
        {"decode only (ceiling)", OpsBefore(with_threads, "random_resized_crop"), {}},
        {"unfused", with_threads, unfused},
        {"fused", with_threads, {}},
        {"fused, dct_scaling (approximate)", WithDctScaling(with_threads), {}}};
    ASSIGN_OR_RETURN(const std::vector<std::unique_ptr<Pipeline>> pipelines,
                     CreatePipelines(configs, registries));
    ASSIGN_OR_RETURN(const std::vector<EpochRates> rates,
                     InterleaveEpochs(pipelines, repetitions, env));
    const std::string at = absl::StrCat(threads, " thread(s) per parallel_map");
    for (size_t i = 0; i < configs.size(); ++i) {
      report.AddSeries(absl::StrCat(configs[i].name, ", ", at), "images/s", rates[i].rates);
    }
    report.AddHeadline(absl::StrCat(at, ": fused / unfused"),
                       Median(rates[2].rates) / Median(rates[1].rates), "x",
                       BenchTarget::AtLeast(1.5));
    report.AddHeadline(absl::StrCat(at, ": fused / decode-only ceiling"),
                       Median(rates[2].rates) / Median(rates[0].rates), "x",
                       BenchTarget::AtLeast(1.0));
    report.AddHeadline(absl::StrCat(at, ": fused with dct_scaling / unfused"),
                       Median(rates[3].rates) / Median(rates[1].rates), "x",
                       BenchTarget::AtLeast(1.5));
  }
  const PipelineDef crops = OpsBefore(def, "random_flip");
  ASSIGN_OR_RETURN(const std::vector<std::unique_ptr<Pipeline>> both,
                   CreatePipelines({{"exact", crops, {}}, {"dct", WithDctScaling(crops), {}}},
                                   registries));
  ASSIGN_OR_RETURN(const std::vector<Tensor> exact, EpochImages(*both[0], env));
  ASSIGN_OR_RETURN(const std::vector<Tensor> scaled, EpochImages(*both[1], env));
  ASSIGN_OR_RETURN(const double difference, MeanAbsoluteDifference(exact, scaled));
  report.AddHeadline("dct_scaling: mean |crop - exact crop|", difference, "levels of 255");
  report.AddNote(
      "The decode-only ceiling runs parse_example and decode_jpeg (whole images) and nothing "
      "after; unfused and fused run the whole pipeline, fused decoding only the window "
      "random_resized_crop keeps (same output bytes); with dct_scaling, windows of at least "
      "448x448 decode at 1/2 (or less) in the DCT domain (approximate). Interleaved epochs "
      "after a warm-up.");
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::BenchMain(argc, argv, "decode_crop_bench", granary::Run);
}
