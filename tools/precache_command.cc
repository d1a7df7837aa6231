// granary precache: fills the cache a training job will read, before it starts (issue 20;
// Client::Precache, client/precache.h).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "granary/client.h"
#include "pipeline/pipeline_loader.h"
#include "tools/client_flags.h"
#include "tools/command_flags.h"
#include "tools/commands.h"

GRANARY_COMMAND_BORROWS_FLAG(std::string, dispatcher);  // status_command.cc
GRANARY_COMMAND_BORROWS_FLAG(std::string, pipeline);
GRANARY_COMMAND_BORROWS_FLAG(uint64_t, seed);
GRANARY_COMMAND_BORROWS_FLAG(int32_t, num_worker_slots);
ABSL_FLAG(std::string, at_mark, "",
          "granary precache: cache up to the pipeline's first mark op, which must have this name "
          "(the training job's cache_policy at_mark); empty: the whole pipeline (full).");
ABSL_FLAG(int64_t, timeout_s, 3600,
          "granary precache: give up (exit 1) when the cache is not complete after this long.");

namespace granary {
namespace {

// The names of the pipeline's mark ops, in order.
std::vector<std::string> MarkNames(const PipelineDef& def) {
  std::vector<std::string> names;
  for (const OpDef& op : def.ops()) {
    if (op.op() != "mark") continue;
    const auto it = op.params().fields().find("name");
    names.push_back(it == op.params().fields().end() ? "" : it->second.string_value());
  }
  return names;
}

absl::Status Precache() {
  Env* env = Env::Default();
  ASSIGN_OR_RETURN(ClientOptions options, ClientConnectionFromFlags(env));
  const std::string path = absl::GetFlag(FLAGS_pipeline);
  if (path.empty()) return absl::InvalidArgumentError("--pipeline is required");
  ASSIGN_OR_RETURN(PipelineDef def, LoadPipelineFile(env, path));
  PrecacheSpec spec;
  spec.seed = absl::GetFlag(FLAGS_seed);
  spec.num_worker_slots = absl::GetFlag(FLAGS_num_worker_slots);
  spec.timeout_ms = absl::GetFlag(FLAGS_timeout_s) * 1000;
  const std::string mark = absl::GetFlag(FLAGS_at_mark);
  if (!mark.empty()) {
    // The training job's at_mark caches at the first mark: precaching any other would fill a
    // cache nobody reads.
    const std::vector<std::string> marks = MarkNames(def);
    if (marks.empty() || marks.front() != mark) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pipeline ", path, ": --at_mark ", mark, " must name its first mark op (marks: ",
          marks.empty() ? "none" : absl::StrJoin(marks, ", "), ")"));
    }
    spec.cache_policy = JobCachePolicy::kAtMark;
  }
  options.stall_timeout_ms = spec.timeout_ms;
  ASSIGN_OR_RETURN(std::unique_ptr<Client> client, Client::Connect(options));
  ASSIGN_OR_RETURN(const std::string dataset, client->RegisterPipeline(def));
  ASSIGN_OR_RETURN(const PrecacheResult result, client->Precache(dataset, spec));
  if (result.already_complete) {
    std::printf("precache: cache %s was already complete: %lld elements\n",
                result.cache_key.c_str(), static_cast<long long>(result.num_elements));
  } else {
    std::printf("precache: cache %s complete: %lld elements (%lld read through the Put epoch)\n",
                result.cache_key.c_str(), static_cast<long long>(result.num_elements),
                static_cast<long long>(result.elements_read));
  }
  return absl::OkStatus();
}

}  // namespace

int PrecacheCommand(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "granary precache --dispatcher HOST:PORT --pipeline P.json [--at_mark NAME] [--seed S] "
      "[--num_worker_slots N] [--timeout_s T] (--tls_ca CA [--tls_cert C --tls_key K | "
      "--token_file T] | --insecure | --config FILE)");
  ParseCommandFlags(argc, argv);
  const absl::Status status = Precache();
  if (!status.ok()) {
    std::fprintf(stderr, "granary precache: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace granary
