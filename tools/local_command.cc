// granary local: runs a pipeline in-process, prints per-epoch throughput and writes the digest
// file (DESIGN.md §6) that service runs are compared against.
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cache/cache_policy.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "obs/progress_line.h"
#include "pipeline/local_runner.h"
#include "pipeline/optimizer/auto_order.h"
#include "pipeline/pipeline_loader.h"
#include "tools/commands.h"
#include "tools/udf_flags.h"

ABSL_FLAG(std::string, pipeline, "", "Pipeline file (JSON PipelineDef; ${NAME} expands from env).");
ABSL_FLAG(int64_t, epochs, 1, "Number of epochs to run.");
ABSL_FLAG(uint64_t, seed, 0, "Job seed: keys shuffling and every random augmentation.");
ABSL_FLAG(std::string, digest_out, "", "If set, write one digest line per epoch to this file.");
ABSL_FLAG(std::string, cache_policy, "compute",
          "compute | full | at_mark | auto: the job's Put/Get cache (DESIGN.md §5). `local` runs "
          "the pinned prefix (the cached one; under auto every op up to the last mark) as epoch "
          "0 in every epoch, which is what the service serves whatever it caches.");
ABSL_FLAG(bool, auto_order, false,
          "Reorder the pipeline by AutoOrder (pipeline/optimizer/auto_order.h): swaps that change "
          "no output byte. `local` prints the order it chose and runs it; `run` has the job's "
          "workers do so.");

namespace granary {
namespace {

absl::Status RunLocal() {
  const std::string path = absl::GetFlag(FLAGS_pipeline);
  if (path.empty()) return absl::InvalidArgumentError("--pipeline is required");
  const int64_t epochs = absl::GetFlag(FLAGS_epochs);
  if (epochs < 1) return absl::InvalidArgumentError("--epochs must be at least 1");
  Env* env = Env::Default();
  ASSIGN_OR_RETURN(PipelineRegistries registries, PipelineRegistriesFromFlags());
  ASSIGN_OR_RETURN(PipelineDef def, LoadPipelineFile(env, path));
  if (absl::GetFlag(FLAGS_auto_order)) {
    ASSIGN_OR_RETURN(const std::vector<OpProfile> profile, ProfileOps(def, registries, env));
    def = Reorder(def, registries, profile);
    std::printf("auto_order: %s\n", DescribeOrder(def).c_str());
  }
  auto pipeline = Pipeline::Create(def, registries);
  if (!pipeline.ok()) return Annotate(pipeline.status(), absl::StrCat("pipeline ", path));
  EpochRunOptions run_options;
  ASSIGN_OR_RETURN(const CachePolicy cache_policy,
                   ParseCachePolicy(absl::GetFlag(FLAGS_cache_policy)));
  // A policy the pipeline cannot have fails its first epoch, as the service's would.
  const absl::StatusOr<std::optional<int>> pinned = PinnedPrefixOps(def, cache_policy);
  if (pinned.ok()) run_options.pinned_prefix_ops = *pinned;

  std::string digests;
  int64_t total_rows = 0;
  double total_seconds = 0;
  ProgressLine progress;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    progress.Update(absl::StrCat("running epoch ", epoch, " of ", epochs, "..."));
    const absl::StatusOr<EpochResult> result =
        pinned.ok()
            ? RunEpochInProcess(**pipeline, absl::GetFlag(FLAGS_seed), epoch, env, run_options)
            : absl::StatusOr<EpochResult>(pinned.status());
    progress.Clear();
    if (!result.ok()) {
      return Annotate(result.status(), absl::StrCat("pipeline ", path, ": epoch ", epoch));
    }
    std::printf("epoch %lld: %lld elements, %lld rows, %.1f MB in %.2f s: %.0f rows/s%s\n",
                static_cast<long long>(epoch), static_cast<long long>(result->elements),
                static_cast<long long>(result->rows), result->bytes / 1e6, result->seconds,
                result->rows / std::max(result->seconds, 1e-9),
                result->skipped == 0
                    ? ""
                    : absl::StrCat(", ", result->skipped, " skipped (ignore_errors)").c_str());
    std::fflush(stdout);
    total_rows += result->rows;
    total_seconds += result->seconds;
    absl::StrAppend(&digests, result->digest_line, "\n");
  }
  std::printf("total: %lld rows in %.2f s: %.0f rows/s\n", static_cast<long long>(total_rows),
              total_seconds, total_rows / std::max(total_seconds, 1e-9));
  const std::string digest_out = absl::GetFlag(FLAGS_digest_out);
  if (!digest_out.empty()) RETURN_IF_ERROR(WriteStringToFile(env, digest_out, digests, true));
  return absl::OkStatus();
}

}  // namespace

int LocalCommand(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "granary local --pipeline P.json --epochs N [--seed S] [--cache_policy C] [--digest_out F] "
      "[--plugin lib.so]");
  ParseCommandFlags(argc, argv);
  const absl::Status status = RunLocal();
  if (!status.ok()) {
    std::fprintf(stderr, "granary local: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace granary
