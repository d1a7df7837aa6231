// An example trainer: reads N epochs of a pipeline from a Granary service through the client
// library and prints what it got. A real trainer would feed each batch to its model.
//
//   granary_trainer --dispatcher HOST:PORT [--epochs N] [--pipeline P.json] [--job_name J]
//                   [--seed S] [--rpc_timeout_ms T]
//                   (--tls_ca CA [--tls_cert C --tls_key K] | --insecure)
//
// Without --pipeline it reads the built-in PipelineBuilder pipeline range(1000) -> shuffle(64)
// -> batch(32).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "google/protobuf/util/json_util.h"
#include "granary/client.h"

namespace {

constexpr char kUsage[] =
    "usage: granary_trainer --dispatcher HOST:PORT [--epochs N] [--pipeline P.json]\n"
    "                       [--job_name J] [--seed S] [--rpc_timeout_ms T]\n"
    "                       (--tls_ca CA [--tls_cert C --tls_key K] | --insecure)\n";

int Fail(const std::string& message) {
  std::fprintf(stderr, "granary_trainer: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dispatcher, pipeline_path, job_name;
  long long epochs = 1, seed = 0, rpc_timeout_ms = 10000;
  granary::ClientOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--insecure") {
      options.insecure = true;
      continue;
    }
    if (i + 1 >= argc) return Fail("missing value for " + arg + "\n" + kUsage);
    const std::string value = argv[++i];
    if (arg == "--dispatcher") {
      dispatcher = value;
    } else if (arg == "--epochs") {
      epochs = std::atoll(value.c_str());
    } else if (arg == "--pipeline") {
      pipeline_path = value;
    } else if (arg == "--job_name") {
      job_name = value;
    } else if (arg == "--seed") {
      seed = std::atoll(value.c_str());
    } else if (arg == "--rpc_timeout_ms") {
      rpc_timeout_ms = std::atoll(value.c_str());
    } else if (arg == "--tls_ca") {
      options.tls_ca_file = value;
    } else if (arg == "--tls_cert") {
      options.tls_cert_file = value;
    } else if (arg == "--tls_key") {
      options.tls_key_file = value;
    } else {
      return Fail("unknown flag " + arg + "\n" + kUsage);
    }
  }
  if (dispatcher.empty()) return Fail(std::string("--dispatcher is required\n") + kUsage);

  granary::PipelineDef pipeline;
  if (pipeline_path.empty()) {
    pipeline = granary::PipelineBuilder::Range(1000).Shuffle(64).Batch(32).Build();
  } else {
    std::ifstream in(pipeline_path);
    if (!in) return Fail("cannot read " + pipeline_path);
    std::stringstream text;
    text << in.rdbuf();
    const auto parsed = google::protobuf::util::JsonStringToMessage(text.str(), &pipeline);
    if (!parsed.ok()) return Fail(pipeline_path + ": " + parsed.ToString());
  }

  options.dispatcher_address = dispatcher;
  options.rpc_timeout_ms = static_cast<int>(rpc_timeout_ms);
  auto client = granary::Client::Connect(options);
  if (!client.ok()) return Fail(client.status().ToString());
  auto dataset = (*client)->RegisterPipeline(pipeline);
  if (!dataset.ok()) return Fail(dataset.status().ToString());
  granary::JobSpec spec;
  spec.name = job_name;
  spec.seed = static_cast<uint64_t>(seed);
  auto job = (*client)->OpenJob(*dataset, spec);
  if (!job.ok()) return Fail(job.status().ToString());

  for (long long epoch = 0; epoch < epochs; ++epoch) {
    auto reader = (*job)->ReadEpoch(epoch);
    if (!reader.ok()) return Fail(reader.status().ToString());
    granary::ElementProto batch;
    bool end = false;
    long long rows = 0;
    while (true) {
      const absl::Status status = (*reader)->Next(&batch, &end);
      if (!status.ok()) return Fail(status.ToString());
      if (end) break;
      // "Train": count the rows of the batch (its leading dimension).
      const auto& tensors = batch.tensors();
      rows += tensors.empty() || tensors[0].shape().empty() ? 1 : tensors[0].shape(0);
    }
    const granary::EpochStats stats = (*reader)->stats();
    std::printf(
        "epoch %lld: %lld batches, %lld rows, %lld payload bytes, %lld duplicates and "
        "%lld recomputed dropped\n",
        epoch, static_cast<long long>(stats.elements), rows,
        static_cast<long long>(stats.payload_bytes),
        static_cast<long long>(stats.duplicates_dropped),
        static_cast<long long>(stats.recomputed_dropped));
  }
  return 0;
}
