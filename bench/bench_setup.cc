#include "bench/bench_setup.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/process_stats.h"
#include "common/status_macros.h"
#include "pipeline/local_runner.h"
#include "pipeline/pipeline_loader.h"
#include "tools/synthetic_imagenet.h"

namespace granary {

absl::StatusOr<std::string> ImagenetDataset(Env* env, const std::string& root, int64_t images,
                                            int64_t size) {
  SyntheticImagenetOptions data;
  data.images = images;
  data.size = size;
  data.files = 8;
  data.out_dir = absl::StrCat(root, "/imagenet_", size, "_", images);
  if (!env->FileExists(data.out_dir + "/train-00000-of-00008.tfrecord")) {
    RETURN_IF_ERROR(WriteSyntheticImagenet(env, data).status());
  }
  return data.out_dir;
}

absl::StatusOr<PipelineDef> ImagenetPipeline(Env* env, const std::string& root, int64_t images,
                                             int64_t size, const std::string& pipeline_path) {
  ASSIGN_OR_RETURN(const std::string dir, ImagenetDataset(env, root, images, size));
  ::setenv("GRANARY_DATA", dir.c_str(), 1);
  return LoadPipelineFile(env, pipeline_path);
}

absl::StatusOr<ServiceEpoch> ReadServiceEpoch(Job& job, int64_t epoch, int32_t consumer,
                                              EpochDigest* digest) {
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(std::unique_ptr<EpochReader> reader, job.ReadEpoch(epoch, consumer));
  ServiceEpoch read;
  ReceivedElement element;
  bool end = false;
  while (true) {
    RETURN_IF_ERROR(reader->Next(&element, &end));
    if (end) break;
    const std::vector<int64_t>& shape = element.tensor(0).shape;
    const int64_t rows = shape.empty() ? 1 : shape[0];
    if (element.padding()) {
      ++read.padding_elements;
      read.padding_rows += rows;
      continue;
    }
    ++read.elements;
    read.rows += rows;
    read.seconds_to_last_element = absl::ToDoubleSeconds(absl::Now() - start);
    if (digest != nullptr) digest->Add(element.tensors());
  }
  read.bytes = reader->stats().payload_bytes;
  read.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return read;
}

absl::StatusOr<std::vector<std::unique_ptr<Pipeline>>> CreatePipelines(
    const std::vector<NamedPipeline>& configs, const PipelineRegistries& registries) {
  std::vector<std::unique_ptr<Pipeline>> pipelines;
  for (const NamedPipeline& config : configs) {
    ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> p,
                     Pipeline::Create(config.def, registries, config.options));
    pipelines.push_back(std::move(p));
  }
  return pipelines;
}

PipelineDef OpsBefore(PipelineDef def, const std::string& name) {
  auto* ops = def.mutable_ops();
  for (int i = 0; i < ops->size(); ++i) {
    if (ops->Get(i).op() == name || ops->Get(i).udf() == name) {
      ops->DeleteSubrange(i, ops->size() - i);
      break;
    }
  }
  return def;
}

absl::StatusOr<std::vector<EpochRates>> InterleaveEpochs(
    const std::vector<std::unique_ptr<Pipeline>>& pipelines, int repetitions, Env* env) {
  std::vector<EpochRates> measured(pipelines.size());
  for (int rep = -1; rep < repetitions; ++rep) {
    for (size_t i = 0; i < pipelines.size(); ++i) {
      EpochRunOptions options;
      options.digest = false;
      int64_t rows = 0;
      const bool batched = pipelines[i]->batched();
      options.on_element = [&rows, batched](const Element& e) {
        rows += batched ? e.tensors[0].shape()[0] : 1;
      };
      const double cpu_before = CpuSecondsOf();
      ASSIGN_OR_RETURN(EpochResult result,
                       RunEpochInProcess(*pipelines[i], 1, rep + 1, env, options));
      if (rep < 0) continue;
      measured[i].rates.push_back(rows / result.seconds);
      measured[i].cpu_seconds += CpuSecondsOf() - cpu_before;
      measured[i].wall_seconds += result.seconds;
    }
  }
  return measured;
}

}  // namespace granary
